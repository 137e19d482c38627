# --8<-- [start:lesson]
import torch


class MulSaved(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x * w

    @staticmethod
    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        return grad * w, grad * x


x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
w = torch.tensor([0.5, -1.0, 2.0], requires_grad=True)
loss = MulSaved.apply(x, w).sum()
loss.backward(retain_graph=True)  # (1)!
with torch.no_grad():
    w -= 0.5 * w.grad  # (2)!
try:
    loss.backward()  # (3)!
except RuntimeError as error:
    message = str(error)
    print(f"{message[:62]}...")
# --8<-- [end:lesson]

# --8<-- [start:proof]
assert w._version == 1


class MulOnCtx(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.x, ctx.w = x, w
        return x * w

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.w, grad * ctx.x


def retain_step_backward(mul):
    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    w = torch.tensor([0.5, -1.0, 2.0], requires_grad=True)
    w_before = w.detach().clone()
    loss = mul(x, w).sum()
    loss.backward(retain_graph=True)
    with torch.no_grad():
        w -= 0.5 * w.grad
    assert w._version == 1
    try:
        loss.backward()
    except RuntimeError as error:
        return str(error), None, w_before, w.detach().clone()
    return None, x.grad.clone(), w_before, w.detach().clone()


def reference_mul(a, b):
    return a * b


expected, _, _, _ = retain_step_backward(reference_mul)  # (1)!
assert expected.startswith(
    "one of the variables needed for gradient computation has been modified by an inplace operation"
)
assert message == expected
assert retain_step_backward(MulSaved.apply)[0] == expected

error, grad, w_before, w_after = retain_step_backward(MulOnCtx.apply)  # (2)!
assert error is None
assert not torch.equal(w_after, w_before)
assert torch.equal(grad, w_before + w_after)
assert not torch.equal(grad, 2 * w_before)

x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
w = torch.tensor([0.5, -1.0, 2.0], requires_grad=True)
w_before = w.detach().clone()
loss = MulSaved.apply(x, w).sum()
loss.backward(retain_graph=True)
torch.optim.SGD([w], lr=0.5, fused=True).step()  # (3)!
assert w._version == 0 and not torch.equal(w, w_before)
loss.backward()
assert torch.equal(x.grad, w_before + w.detach())

x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
w = torch.tensor([0.5, -1.0, 2.0], requires_grad=True)
w_before = w.detach().clone()
with torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):  # (4)!
    loss = MulSaved.apply(x, w).sum()
loss.backward(retain_graph=True)
with torch.no_grad():
    w -= 0.5 * w.grad
assert w._version == 1
loss.backward()
assert torch.equal(x.grad, w_before + w.detach())
# --8<-- [end:proof]
