# --8<-- [start:lesson]
import torch
from torch.autograd.function import once_differentiable


class CubeOnce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x**3

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * 3 * x**2


x, w = torch.tensor([1.0, 2.0], requires_grad=True), torch.tensor([0.5, -1.0], requires_grad=True)
(dx,) = torch.autograd.grad((w * CubeOnce.apply(x)).sum(), x, create_graph=True)
(dw,) = torch.autograd.grad(dx.pow(2).sum(), w, allow_unused=True)  # (1)!
print("autograd.grad(allow_unused=True):", dw)
# --8<-- [end:lesson]

# --8<-- [start:proof]
(ref_dx,) = torch.autograd.grad((w * x**3).sum(), x, create_graph=True)
(ref_w,) = torch.autograd.grad(ref_dx.pow(2).sum(), w)
assert dw is None and torch.equal(ref_w, 18 * w.detach() * x.detach() ** 4)  # (1)!
assert not torch.equal(ref_w, torch.zeros_like(ref_w))

leaves = [fn.variable for fn, _ in dx.grad_fn.next_functions]
assert leaves and all(leaf is not x and leaf is not w and leaf.is_leaf for leaf in leaves)  # (2)!

(dx,) = torch.autograd.grad((w * CubeOnce.apply(x)).sum(), x, create_graph=True)
try:
    torch.autograd.grad(dx.pow(2).sum(), w)  # (3)!
    raise AssertionError("autograd.grad should report w as unused")
except RuntimeError as error:
    assert str(error).startswith(
        "The differentiated Tensor at index 0 appears to not have been used in the graph"
    )

(dx,) = torch.autograd.grad(CubeOnce.apply(x).sum(), x, create_graph=True)
assert dx.grad_fn is None and not dx.requires_grad  # (4)!
try:
    dx.sum().backward()
    raise AssertionError("a tensor without grad_fn cannot be differentiated")
except RuntimeError as error:
    assert str(error) == "element 0 of tensors does not require grad and does not have a grad_fn"
# --8<-- [end:proof]
