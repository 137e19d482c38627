import torch

torch.manual_seed(0)

w = torch.randn(3, requires_grad=True)
x = torch.randn(3)


def chain(loss):
    """The nodes from loss.grad_fn down to w: Sum, Exp, Mul, AccumulateGrad."""
    nodes = [loss.grad_fn]
    while nodes[-1].next_functions:
        nodes.append(nodes[-1].next_functions[0][0])
    return nodes


loss_a = (w * x).exp().sum()
loss_a.backward()  # (1)!
try:
    _ = chain(loss_a)[1]._saved_result  # what exp() saved
except RuntimeError:
    pass
else:
    raise AssertionError("the backward should have freed the first graph's saved tensors")

loss_b = (w * x).exp().sum()  # (2)!
loss_b.backward()  # (3)!

a, b = chain(loss_a), chain(loss_b)
assert [n.name() for n in a] == ["SumBackward0", "ExpBackward0", "MulBackward0",
                                 "torch::autograd::AccumulateGrad"]
assert all(m is not n for m, n in zip(a[:3], b[:3], strict=True))
assert a[3] is b[3] and a[3].variable is w
assert not [name for name in dir(a[3]) if name.startswith("_raw_saved_")]
assert torch.equal(loss_a, loss_b)
print("same value:                      ", torch.equal(loss_a, loss_b))
print("same Sum, Exp, Mul nodes:        ", [m is n for m, n in zip(a[:3], b[:3], strict=True)])
print("same AccumulateGrad node (for w):", a[3] is b[3])
