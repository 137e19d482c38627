import torch
from torch.autograd.function import once_differentiable


# --8<-- [start:shown]
class Cube(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x**3

    @staticmethod
    def backward(ctx, grad):  # (1)!
        (x,) = ctx.saved_tensors
        return grad * 3 * x**2


class CubeOnce(Cube):
    @staticmethod
    @once_differentiable  # (2)!
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * 3 * x**2


x = torch.tensor([1.0, 2.0], requires_grad=True)
w = torch.tensor([0.5, -1.0], requires_grad=True)
for F in (Cube, CubeOnce):
    x.grad = w.grad = None
    loss = (w * F.apply(x)).sum()
    (dx,) = torch.autograd.grad(loss, x, create_graph=True)  # (3)!
    penalty = dx.pow(2).sum()  # a gradient penalty
    try:
        penalty.backward()  # (4)!
        print(f"{F.__name__}: x.grad {x.grad.tolist()}, w.grad {w.grad.tolist()}")
    except RuntimeError as error:
        print(f"{F.__name__}: {error}")
# --8<-- [end:shown]
# --8<-- [start:grad]
x.grad = w.grad = None
(dx,) = torch.autograd.grad((w * CubeOnce.apply(x)).sum(), x, create_graph=True)
(dw,) = torch.autograd.grad(dx.pow(2).sum(), w, allow_unused=True)
print("CubeOnce, autograd.grad with allow_unused=True:", dw)
# --8<-- [end:grad]


def reference(x, w):
    """The same penalty written with ordinary ops: x.grad and w.grad."""
    x, w = x.detach().requires_grad_(), w.detach().requires_grad_()
    (dx,) = torch.autograd.grad((w * x**3).sum(), x, create_graph=True)
    dx.pow(2).sum().backward()
    return x.grad, w.grad


def penalty_grads(F):
    x.grad = w.grad = None
    (dx,) = torch.autograd.grad((w * F.apply(x)).sum(), x, create_graph=True)
    dx.pow(2).sum().backward()
    return x.grad.clone(), w.grad.clone()


# Cube: the second-order gradients equal the ordinary ops' and the closed form
# (penalty = 9 w^2 x^4, so d/dx = 36 w^2 x^3 and d/dw = 18 w x^4); all values are exact here.
ref_x, ref_w = reference(x, w)
got_x, got_w = penalty_grads(Cube)
assert torch.equal(got_x, ref_x) and torch.equal(got_w, ref_w)
xd, wd = x.detach(), w.detach()
assert torch.equal(ref_x, 36 * wd**2 * xd**3) and torch.equal(ref_w, 18 * wd * xd**4)

# Grad mode inside backward: on under create_graph=True and off without it; always off
# inside a once_differentiable backward.
grad_mode_in_backward = []


class CubeRecording(Cube):
    @staticmethod
    def backward(ctx, grad):
        grad_mode_in_backward.append(torch.is_grad_enabled())
        return Cube.backward(ctx, grad)


class CubeOnceRecording(Cube):
    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        grad_mode_in_backward.append(torch.is_grad_enabled())
        return Cube.backward(ctx, grad)


for F in (CubeRecording, CubeOnceRecording):
    torch.autograd.grad((w * F.apply(x)).sum(), x, create_graph=True)
    torch.autograd.grad((w * F.apply(x)).sum(), x)
assert grad_mode_in_backward == [True, False, False, False]

# create_graph=True keeps the graph as well: the same loss can be walked again.
loss = (w * Cube.apply(x)).sum()
(first,) = torch.autograd.grad(loss, x, create_graph=True)
(second,) = torch.autograd.grad(loss, x)  # no retain_graph: this one frees it
assert torch.equal(first, second)
try:
    torch.autograd.grad(loss, x)
    raise AssertionError("the third pass should find the graph freed")
except RuntimeError as error:
    assert str(error).startswith("Trying to backward through the graph a second time")

# CubeOnce: the first-order gradient is right, and it has a graph (an Error node) ...
x.grad = w.grad = None
(dx,) = torch.autograd.grad((w * CubeOnce.apply(x)).sum(), x, create_graph=True)
(ref_dx,) = torch.autograd.grad((w * x**3).sum(), x)
assert torch.equal(dx, ref_dx) and type(dx.grad_fn).__name__ == "Error"
# ... whose inputs are detached copies (leaves of their own), not x or w ...
leaves = [fn.variable for fn, _ in dx.grad_fn.next_functions]
assert leaves and all(leaf is not x and leaf is not w and leaf.is_leaf for leaf in leaves)
# ... .backward() reaches the Error node and raises ...
try:
    dx.pow(2).sum().backward()
    raise AssertionError("CubeOnce: the second-order backward should fail")
except RuntimeError as error:
    message = str(error)
assert message == (
    "trying to differentiate twice a function that was marked with @once_differentiable"
)
# ... autograd.grad(..., w) never runs that node: a different error, and with
# allow_unused=True no error at all, only None where the gradient is 18 w x^4.
(dx,) = torch.autograd.grad((w * CubeOnce.apply(x)).sum(), x, create_graph=True)
try:
    torch.autograd.grad(dx.pow(2).sum(), w)
    raise AssertionError("autograd.grad should report w as unused")
except RuntimeError as error:
    assert str(error).startswith(
        "The differentiated Tensor at index 0 appears to not have been used in the graph"
    )
assert dw is None and not torch.equal(ref_w, torch.zeros_like(ref_w))

# When no incoming gradient requires grad (the loss is CubeOnce's output summed), the
# first-order gradient has no graph at all, and the second order fails with a generic error.
(dx,) = torch.autograd.grad(CubeOnce.apply(x).sum(), x, create_graph=True)
assert dx.grad_fn is None and not dx.requires_grad
try:
    dx.sum().backward()
    raise AssertionError("a tensor without grad_fn cannot be differentiated")
except RuntimeError as error:
    assert str(error) == "element 0 of tensors does not require grad and does not have a grad_fn"
