import torch


class MulSaved(torch.autograd.Function):  # the two Functions of the program above
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x * w

    @staticmethod
    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        return grad * w, grad * x


class MulOnCtx(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.x, ctx.w = x, w
        return x * w

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.w, grad * ctx.x


# --8<-- [start:shown]
for Mul in (MulSaved, MulOnCtx):
    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    w = torch.tensor([0.5, -1.0, 2.0], requires_grad=True)
    loss = Mul.apply(x, w).sum()
    loss.backward(retain_graph=True)  # (1)!
    with torch.no_grad():
        w -= 0.5 * w.grad  # (2)!
    try:
        loss.backward()
        print(f"{Mul.__name__}: x.grad = {x.grad.tolist()}")  # (3)!
    except RuntimeError as error:
        print(f"{Mul.__name__}: {str(error)[:62]}...")
# --8<-- [end:shown]


def retain_step_backward(mul):
    """Backward with retain_graph, an SGD step on w, a second backward through the old graph.

    Returns the error of the second backward (or None), x.grad, and w before and after the step.
    """
    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    w = torch.tensor([0.5, -1.0, 2.0], requires_grad=True)
    w_before = w.detach().clone()
    loss = mul(x, w).sum()
    loss.backward(retain_graph=True)
    with torch.no_grad():
        w -= 0.5 * w.grad
    assert w._version == 1  # the step changed w in place: its version counter moved
    try:
        loss.backward()
    except RuntimeError as error:
        return str(error), None, w_before, w.detach().clone()
    return None, x.grad.clone(), w_before, w.detach().clone()


def reference_mul(a, b):
    return a * b  # the same function written with an ordinary op


# save_for_backward: the in-place change is caught, with the ordinary op's message.
expected, _, _, _ = retain_step_backward(reference_mul)
assert expected.startswith(
    "one of the variables needed for gradient computation has been modified by an inplace operation"
)
message, _, _, _ = retain_step_backward(MulSaved.apply)
assert message == expected

# ctx attributes: no error; x.grad adds the old w (first pass) and the new w (second pass).
message, grad, w_before, w_after = retain_step_backward(MulOnCtx.apply)
assert message is None
assert not torch.equal(w_after, w_before)
assert torch.equal(grad, w_before + w_after)  # the second pass used the new w
assert not torch.equal(grad, 2 * w_before)  # what two passes through the old graph give
