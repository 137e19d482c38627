# --8<-- [start:lesson]
import torch


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
    @torch.autograd.function.once_differentiable  # (2)!
    def backward(ctx, grad):
        return Cube.backward(ctx, grad)


x, w = torch.tensor([1.0, 2.0], requires_grad=True), torch.tensor([0.5, -1.0], requires_grad=True)
for F in (Cube, CubeOnce):
    (dx,) = torch.autograd.grad((w * F.apply(x)).sum(), x, create_graph=True)  # (3)!
    try:
        dx.pow(2).sum().backward()  # (4)!
        print(f"{F.__name__} | x.grad: {x.grad.tolist()} | w.grad: {w.grad.tolist()}")
    except RuntimeError as error:
        print(f"{F.__name__} | error: {error}")
# --8<-- [end:lesson]


# --8<-- [start:proof]
def reference(x, w):
    x, w = x.detach().requires_grad_(), w.detach().requires_grad_()
    (dx,) = torch.autograd.grad((w * x**3).sum(), x, create_graph=True)
    dx.pow(2).sum().backward()
    return x.grad, w.grad


def penalty_grads(F):
    x.grad = w.grad = None
    (dx,) = torch.autograd.grad((w * F.apply(x)).sum(), x, create_graph=True)
    dx.pow(2).sum().backward()
    return x.grad.clone(), w.grad.clone()


ref_x, ref_w = reference(x, w)
got_x, got_w = penalty_grads(Cube)
assert torch.equal(got_x, ref_x) and torch.equal(got_w, ref_w)  # (1)!
xd, wd = x.detach(), w.detach()
assert torch.equal(ref_x, 36 * wd**2 * xd**3) and torch.equal(ref_w, 18 * wd * xd**4)

grad_mode_in_backward = []


class CubeRecording(Cube):
    @staticmethod
    def backward(ctx, grad):
        grad_mode_in_backward.append(torch.is_grad_enabled())
        return Cube.backward(ctx, grad)


class CubeOnceRecording(Cube):
    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        grad_mode_in_backward.append(torch.is_grad_enabled())
        return Cube.backward(ctx, grad)


for F in (CubeRecording, CubeOnceRecording):
    torch.autograd.grad((w * F.apply(x)).sum(), x, create_graph=True)
    torch.autograd.grad((w * F.apply(x)).sum(), x)
assert grad_mode_in_backward == [True, False, False, False]  # (2)!

loss = (w * Cube.apply(x)).sum()
(first,) = torch.autograd.grad(loss, x, create_graph=True)
(second,) = torch.autograd.grad(loss, x)  # (3)!
assert torch.equal(first, second)
try:
    torch.autograd.grad(loss, x)
    raise AssertionError("the third pass should find the graph freed")
except RuntimeError as error:
    assert str(error).startswith("Trying to backward through the graph a second time")

x.grad = w.grad = None
(dx,) = torch.autograd.grad((w * CubeOnce.apply(x)).sum(), x, create_graph=True)
(ref_dx,) = torch.autograd.grad((w * x**3).sum(), x)
assert torch.equal(dx, ref_dx) and type(dx.grad_fn).__name__ == "Error"  # (4)!
try:
    dx.pow(2).sum().backward()
    raise AssertionError("CubeOnce: the second-order backward should fail")
except RuntimeError as error:
    assert str(error) == (
        "trying to differentiate twice a function that was marked with @once_differentiable"
    )
# --8<-- [end:proof]
