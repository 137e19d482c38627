# --8<-- [start:lesson]
import torch

torch.manual_seed(0)
w = torch.randn(3, requires_grad=True)
x = torch.randn(3)

loss = (w * x).exp().sum()
loss.backward(retain_graph=True)  # (1)!
first = w.grad.clone()
loss.backward()  # (2)!
print("backward: 1 | w.grad:", [round(g, 2) for g in first.tolist()])
print("backward: 2 | w.grad:", [round(g, 2) for g in w.grad.tolist()])  # (3)!
# --8<-- [end:lesson]

# --8<-- [start:proof]
(reference,) = torch.autograd.grad((w * x).exp().sum(), w)
assert torch.allclose(first, reference, rtol=1e-6, atol=1e-7)  # (1)!
assert torch.allclose(w.grad, 2 * first)


def freed(node):
    try:
        _ = node._saved_result
    except RuntimeError:
        return True
    return False


assert freed(loss.grad_fn.next_functions[0][0])

probe = (w * x).exp().sum()
exp_node = probe.grad_fn.next_functions[0][0]
probe.backward(retain_graph=True)
assert not freed(exp_node)  # (2)!
probe.backward()
assert freed(exp_node)
# --8<-- [end:proof]
