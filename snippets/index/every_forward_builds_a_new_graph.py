# --8<-- [start:lesson]
import torch

torch.manual_seed(0)
w = torch.randn(3, requires_grad=True)
x = torch.randn(3)

loss_a = (w * x).exp().sum()
loss_a.backward()  # (1)!

loss_b = (w * x).exp().sum()  # (2)!
loss_b.backward()  # (3)!
print("same_value:", torch.equal(loss_a, loss_b))
print("same_graph:", loss_a.grad_fn is loss_b.grad_fn)
print("second_backward: ok | retain_graph: False")
# --8<-- [end:lesson]


# --8<-- [start:proof]
def chain(loss):
    nodes = [loss.grad_fn]
    while nodes[-1].next_functions:
        nodes.append(nodes[-1].next_functions[0][0])
    return nodes


a, b = chain(loss_a), chain(loss_b)
assert [n.name() for n in a] == [
    "SumBackward0",
    "ExpBackward0",
    "MulBackward0",
    "torch::autograd::AccumulateGrad",
]
try:
    _ = a[1]._saved_result  # (1)!
except RuntimeError:
    pass
else:
    raise AssertionError("the first backward should have freed the first graph's saved tensors")
assert all(m is not n for m, n in zip(a[:3], b[:3], strict=True))  # (2)!
assert a[3] is b[3] and a[3].variable is w
assert not [name for name in dir(a[3]) if name.startswith("_raw_saved_")]
assert torch.equal(loss_a, loss_b)
(one,) = torch.autograd.grad((w * x).exp().sum(), w)
assert torch.allclose(w.grad, 2 * one, rtol=1e-6, atol=1e-7)  # (3)!
# --8<-- [end:proof]
