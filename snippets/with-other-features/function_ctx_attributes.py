# --8<-- [start:lesson]
import torch


class MulSaved(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)  # (1)!
        return x * w

    @staticmethod
    def backward(ctx, grad):
        x, w = ctx.saved_tensors  # (2)!
        return grad * w, grad * x


x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
w = torch.tensor([0.5, -1.0, 2.0], requires_grad=True)
loss = MulSaved.apply(x, w).sum()
loss.backward(retain_graph=True)  # (3)!
loss.backward()
print("backward: 2 | x.grad:", x.grad.tolist())
try:
    loss.backward()  # (4)!
except RuntimeError as error:
    print(f"backward: 3 | error: {str(error)[:51]}...")
# --8<-- [end:lesson]

# --8<-- [start:proof]
import gc
import weakref

assert torch.equal(x.grad, 2 * w.detach()) and torch.equal(w.grad, 2 * x.detach())


class MulOnCtx(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.x, ctx.w = x, w  # (1)!
        return x * w

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.w, grad * ctx.x


def second_backward_error(mul, retain):
    loss = mul(x, w).sum()
    loss.backward(retain_graph=retain)
    try:
        loss.backward()
    except RuntimeError as error:
        return str(error)
    return None


def reference_mul(a, b):
    return a * b


expected = second_backward_error(reference_mul, retain=False)  # (2)!
assert expected.startswith("Trying to backward through the graph a second time")
assert second_backward_error(MulSaved.apply, retain=False) == expected
for mul in (MulSaved.apply, reference_mul):
    x.grad = w.grad = None
    assert second_backward_error(mul, retain=True) is None
    assert torch.equal(x.grad, 2 * w.detach()) and torch.equal(w.grad, 2 * x.detach())

y = MulSaved.apply(x, w)
node = y.grad_fn
y.sum().backward()
try:
    _ = node.saved_tensors  # (3)!
    raise AssertionError("the saved tensors should have been freed")
except RuntimeError as error:
    assert str(error) == expected
y = MulSaved.apply(x, w)
node = y.grad_fn
y.sum().backward(retain_graph=True)
saved_x, saved_w = node.saved_tensors
assert torch.equal(saved_x, x) and torch.equal(saved_w, w)

x.grad = w.grad = None
y = MulOnCtx.apply(x, w)
node = y.grad_fn
y.sum().backward()
assert node.x is x and node.w is w  # (4)!
assert second_backward_error(MulOnCtx.apply, retain=False) is None
assert torch.equal(x.grad, 3 * w.detach()) and torch.equal(w.grad, 3 * x.detach())


class Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.factor = 3.0
        return x * 3.0

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.factor


x.grad = None
assert second_backward_error(lambda a, b: Scale.apply(a), retain=False) is None  # (5)!
assert torch.equal(x.grad, torch.full((3,), 6.0))


class MulClearOnAccess(MulSaved):
    clear_saved_tensors_on_access = True


message = second_backward_error(MulClearOnAccess.apply, retain=True)  # (6)!
assert message is not None and message.startswith(
    "saved_tensors can only be accessed once when clear_saved_tensors_on_access=True"
)
assert second_backward_error(MulSaved.apply, retain=True) is None


class ExpSaved(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        out = x.exp()
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        return grad * out


class ExpOnCtx(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        out = x.exp()
        ctx.out = out
        return out

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.out


def node_after_del(exp, retain):
    y = exp.apply(x)
    node = weakref.ref(y.grad_fn)
    if retain:
        y.sum().backward(retain_graph=True)
        if exp is ExpSaved:
            assert torch.equal(node().saved_tensors[0], x.exp())
    del y
    return node


gc.disable()
try:
    for retain in (False, True):  # (7)!
        assert node_after_del(ExpSaved, retain)() is None
        kept = node_after_del(ExpOnCtx, retain)
        assert kept() is not None
        gc.collect()
        assert kept() is None
finally:
    gc.enable()
# --8<-- [end:proof]
