# --8<-- [start:lesson]
import torch


def describe(node, depth=0, seen=None):  # (1)!
    seen = set() if seen is None else seen
    name = "  " * depth + type(node).__name__
    if node in seen:
        return [name + " (already shown)"]
    seen.add(node)
    states = []
    for attr in sorted(a for a in dir(node) if a.startswith("_raw_saved_")):  # (2)!
        short = attr.removeprefix("_raw_saved_")
        read = "_saved_" + short if hasattr(type(node), "_saved_" + short) else "saved_" + short
        try:
            if getattr(node, attr) != () and getattr(node, read) is not None:
                states.append(f"{short}: saved")
        except RuntimeError:
            states.append(f"{short}: freed")
    below = [describe(n, depth + 1, seen) for n, _ in node.next_functions if n is not None]  # (3)!
    return [name + (f"  [{', '.join(states)}]" if states else "")] + sum(below, [])


torch.manual_seed(0)
x, W1 = torch.randn(2, 3), torch.randn(3, 4, requires_grad=True)
W2, y = torch.randn(4, 1, requires_grad=True), torch.randn(2, 1)
loss = ((x @ W1).relu() @ W2 - y).pow(2).mean()
print("after: forward", *describe(loss.grad_fn), sep="\n")  # (4)!
loss.backward()
print("after: loss.backward()", *describe(loss.grad_fn), sep="\n")
# --8<-- [end:lesson]

# --8<-- [start:proof]
after = describe(loss.grad_fn)
loss = ((x @ W1).relu() @ W2 - y).pow(2).mean()
before = describe(loss.grad_fn)
sub = loss.grad_fn.next_functions[0][0].next_functions[0][0]
assert type(sub).__name__ == "SubBackward0"
assert sub.next_functions[1][0] is None  # (1)!
first_mm = sub.next_functions[0][0].next_functions[0][0].next_functions[0][0]
assert before[5] == "          MmBackward0  [self: saved]"
assert first_mm.next_functions[0][0] is None
assert torch.equal(first_mm._saved_self, x) and first_mm._saved_mat2 is None  # (2)!
norm = torch.nn.functional.layer_norm(x, (3,), torch.ones(3, requires_grad=True))
assert norm.grad_fn._saved_weight is not None  # (3)!
loss.backward()
assert describe(loss.grad_fn) == after
assert len(before) == len(after) == 8
assert sum(line.count(": saved") for line in before) == 5
assert sum(line.count(": freed") for line in after) == 5
assert [line.split("  [")[0] for line in before] == [line.split("  [")[0] for line in after]

w = torch.randn(3, requires_grad=True)
assert describe((w * w).grad_fn) == [  # (4)!
    "MulBackward0  [other: saved, self: saved]",
    "  AccumulateGrad",
    "  AccumulateGrad (already shown)",
]


class Square(torch.autograd.Function):
    @staticmethod
    def forward(ctx, t):
        ctx.save_for_backward(t)
        return t * t

    @staticmethod
    def backward(ctx, grad):
        (t,) = ctx.saved_tensors
        return 2 * t * grad


class Double(torch.autograd.Function):
    @staticmethod
    def forward(ctx, t):
        return 2 * t

    @staticmethod
    def backward(ctx, grad):
        return 2 * grad


custom = Double.apply(Square.apply(w)).sum()
assert describe(custom.grad_fn)[1:3] == [  # (5)!
    "  DoubleBackward",
    "    SquareBackward  [tensors: saved]",
]
custom.backward()
assert describe(custom.grad_fn)[1:3] == [  # (6)!
    "  DoubleBackward  [tensors: freed]",
    "    SquareBackward  [tensors: freed]",
]
# --8<-- [end:proof]
