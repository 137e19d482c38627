import torch

torch.manual_seed(0)


def describe(output):  # (1)!
    """One line per node reachable from output.grad_fn, with the state of its saved tensors."""
    seen, lines = set(), []

    def visit(node, depth):
        if node is None:  # (2)!
            return
        name = type(node).__name__
        if node in seen:
            lines.append("  " * depth + f"{name} (already shown)")
            return
        seen.add(node)
        states = []
        for attr in sorted(dir(node)):
            if attr.startswith("_raw_saved_"):  # (3)!
                short = attr.removeprefix("_raw_saved_")
                try:
                    value = getattr(node, "_saved_" + short)
                except RuntimeError:
                    states.append(f"{short}: freed")
                else:
                    if value is not None:
                        states.append(f"{short}: saved")
        lines.append("  " * depth + name + (f"  [{', '.join(states)}]" if states else ""))
        for next_node, _ in node.next_functions:
            visit(next_node, depth + 1)

    visit(output.grad_fn, 0)
    return lines


x = torch.randn(2, 3)
W1 = torch.randn(3, 4, requires_grad=True)
W2 = torch.randn(4, 1, requires_grad=True)
y = torch.randn(2, 1)
loss = ((x @ W1).relu() @ W2 - y).pow(2).mean()

before = describe(loss)
sub = loss.grad_fn.next_functions[0][0].next_functions[0][0]
assert type(sub).__name__ == "SubBackward0"
assert sub.next_functions[1][0] is None  # y needs no gradient, so it has no node
first_mm = sub.next_functions[0][0].next_functions[0][0].next_functions[0][0]
assert before[5] == "          MmBackward0  [self: saved]"
assert first_mm.next_functions[0][0] is None  # neither has x
assert torch.equal(first_mm._saved_self, x) and first_mm._saved_mat2 is None  # x, not W1
loss.backward()
after = describe(loss)

assert len(before) == len(after) == 8
assert sum(line.count(": saved") for line in before) == 5
assert sum(line.count(": freed") for line in after) == 5
assert [line.split("  [")[0] for line in before] == [line.split("  [")[0] for line in after]
print("after the forward pass:", *before, sep="\n")
print("after loss.backward():", *after, sep="\n")
