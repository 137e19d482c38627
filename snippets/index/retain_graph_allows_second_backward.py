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


def after_change(forward, change):  # (3)!
    v = w.detach().clone().requires_grad_()
    loss = forward(v)
    loss.backward(retain_graph=True)
    old = v.detach().clone().requires_grad_()
    change(v)
    v.grad = None
    try:
        loss.backward()
    except RuntimeError as error:
        return str(error)
    (at_old,) = torch.autograd.grad(forward(old), old)
    (at_new,) = torch.autograd.grad(forward(v), v)
    return torch.allclose(v.grad, at_old), torch.allclose(v.grad, at_new)


def step(v):
    with torch.no_grad():
        v.sub_(0.5 * v.grad)


def through_data(v):
    v.data.sub_(0.5 * v.grad)


def saves_w(v):
    return ((v * x).exp() * v).sum()


assert after_change(lambda v: (v * x).exp().sum(), step) == (True, False)
assert "modified by an inplace operation" in after_change(saves_w, step)
assert after_change(saves_w, through_data) == (False, False)
# --8<-- [end:proof]
