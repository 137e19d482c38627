import gc
import weakref

import torch


# --8<-- [start:shown]
class MulSaved(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)  # (1)!
        return x * w

    @staticmethod
    def backward(ctx, grad):
        x, w = ctx.saved_tensors  # (2)!
        return grad * w, grad * x


class MulOnCtx(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.x, ctx.w = x, w  # (3)!
        return x * w

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.w, grad * ctx.x


x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
w = torch.tensor([0.5, -1.0, 2.0], requires_grad=True)
for Mul in (MulSaved, MulOnCtx):
    loss = Mul.apply(x, w).sum()
    loss.backward()
    try:
        loss.backward()  # (4)!
        print(f"{Mul.__name__}: second backward ran")
    except RuntimeError as error:
        print(f"{Mul.__name__}: {str(error)[:51]}...")
# --8<-- [end:shown]


def second_backward_error(mul, retain):
    """Two backward passes through one graph: the error of the second one, or None."""
    loss = mul(x, w).sum()
    loss.backward(retain_graph=retain)
    try:
        loss.backward()
    except RuntimeError as error:
        return str(error)
    return None


def reference_mul(a, b):
    return a * b  # the same function written with an ordinary op


# save_for_backward: the same error, word for word, as the ordinary op gives.
expected = second_backward_error(reference_mul, retain=False)
assert expected.startswith("Trying to backward through the graph a second time")
assert second_backward_error(MulSaved.apply, retain=False) == expected
# ... and retain_graph=True lets both through, with the same gradients.
for mul in (MulSaved.apply, reference_mul):
    x.grad = w.grad = None
    assert second_backward_error(mul, retain=True) is None
    assert torch.equal(x.grad, 2 * w.detach()) and torch.equal(w.grad, 2 * x.detach())

# The saved tensors are gone after a backward pass that did not keep the graph ...
y = MulSaved.apply(x, w)
node = y.grad_fn
y.sum().backward()
try:
    _ = node.saved_tensors
    raise AssertionError("the saved tensors should have been freed")
except RuntimeError as error:
    assert str(error) == expected
# ... and still there after one that did.
y = MulSaved.apply(x, w)
node = y.grad_fn
y.sum().backward(retain_graph=True)
saved_x, saved_w = node.saved_tensors
assert torch.equal(saved_x, x) and torch.equal(saved_w, w)

# ctx attributes: still there after a backward that did not keep the graph; the second
# backward runs and adds the same gradients again.
x.grad = w.grad = None
y = MulOnCtx.apply(x, w)
node = y.grad_fn
y.sum().backward()
assert node.x is x and node.w is w
assert second_backward_error(MulOnCtx.apply, retain=False) is None
assert torch.equal(x.grad, 3 * w.detach()) and torch.equal(w.grad, 3 * x.detach())
print("MulOnCtx: tensors still on ctx after backward:", node.x is x and node.w is w)


# The error is raised by reading ctx.saved_tensors, not by the engine: a Function that
# saved no tensor can be walked twice without retain_graph.
class Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.factor = 3.0  # not a tensor
        return x * 3.0

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.factor


x.grad = None
assert second_backward_error(lambda a, b: Scale.apply(a), retain=False) is None
assert torch.equal(x.grad, torch.full((3,), 6.0))


# clear_saved_tensors_on_access=True: the tensors go at the first read, and
# retain_graph=True does not bring them back.
class MulClearOnAccess(MulSaved):
    clear_saved_tensors_on_access = True


message = second_backward_error(MulClearOnAccess.apply, retain=True)
assert message is not None and message.startswith(
    "saved_tensors can only be accessed once when clear_saved_tensors_on_access=True"
)
assert second_backward_error(MulSaved.apply, retain=True) is None


# A tensor stashed on ctx lives as long as the node. The output on ctx is a reference
# cycle (output -> grad_fn -> ctx -> output): dropping the output frees nothing until
# the garbage collector runs. Saved with save_for_backward, it goes at once.
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
    """A weak reference to the backward node, taken before the output is dropped.

    Either no backward pass at all, or one that keeps the graph: a backward pass that
    frees the graph would clear the saved tensors itself and prove nothing here.
    """
    y = exp.apply(x)
    node = weakref.ref(y.grad_fn)
    if retain:
        y.sum().backward(retain_graph=True)
        if exp is ExpSaved:  # the saved output is still there when the output is dropped
            assert torch.equal(node().saved_tensors[0], x.exp())
    del y
    return node


gc.disable()
try:
    for retain in (False, True):
        assert node_after_del(ExpSaved, retain)() is None  # freed at once
        kept = node_after_del(ExpOnCtx, retain)
        assert kept() is not None  # the cycle keeps the node and its tensors
        gc.collect()
        assert kept() is None  # until the garbage collector runs
finally:
    gc.enable()
