import torch

torch.manual_seed(0)
inputs = torch.randn(3, 10)
labels = torch.LongTensor([1, 0, 1])
criterion = torch.nn.CrossEntropyLoss()


def new_net():
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(10, 5), torch.nn.BatchNorm1d(5), torch.nn.Linear(5, 2)
    )


def run(how):
    net = new_net()
    loss = criterion(net(inputs), labels)
    if how == "retain":  # the reference: one forward pass, one update of the statistics
        loss.backward(retain_graph=True)
        loss.backward()
        return net
    loss.backward()
    if how == "eval":  # the old advice
        net.eval()
        loss = criterion(net(inputs), labels)
        loss.backward()
        net.train()
    elif how == "keep buffers":
        # --8<-- [start:keep-buffers]
        saved = [buffer.clone() for buffer in net.buffers()]  # (1)!
        loss = criterion(net(inputs), labels)
        loss.backward()
        for buffer, value in zip(net.buffers(), saved, strict=True):  # (2)!
            buffer.copy_(value)
        # --8<-- [end:keep-buffers]
    else:  # plain recompute
        loss = criterion(net(inputs), labels)
        loss.backward()
    return net


def compare(net, reference):
    grads = zip(net.parameters(), reference.parameters(), strict=True)
    buffers = zip(net.buffers(), reference.buffers(), strict=True)
    max_diff = max((a.grad - b.grad).abs().max().item() for a, b in grads)
    same_buffers = all(torch.equal(a, b) for a, b in buffers)
    return max_diff, same_buffers


reference = run("retain")
results = {how: compare(run(how), reference) for how in ("plain", "eval", "keep buffers")}

# One forward pass counts the batch once; the plain recompute counts it twice.
assert reference[1].num_batches_tracked == 1
assert run("plain")[1].num_batches_tracked == 2

# Plain recompute: training mode normalises with the batch's own statistics, so the
# gradients are identical, but the running statistics moved twice for one batch.
assert results["plain"] == (0.0, False)
# Evaluation mode normalises with the running statistics: other gradients.
assert results["eval"][0] > 0.1 and results["eval"][1]
# Saving and restoring the buffers keeps both right, bit for bit.
assert results["keep buffers"] == (0.0, True)

# The graph saved running_mean and running_var: restoring them before the
# backward pass bumps their version, and that backward pass fails.
net = new_net()
criterion(net(inputs), labels).backward()
saved = [buffer.clone() for buffer in net.buffers()]
loss = criterion(net(inputs), labels)
for buffer, value in zip(net.buffers(), saved, strict=True):
    buffer.copy_(value)
try:
    loss.backward()
except RuntimeError as error:
    assert "modified by an inplace operation" in str(error)
    assert "[torch.FloatTensor [5]]" in str(error)
else:
    raise AssertionError("restoring the buffers before backward should have failed")

for how, (max_diff, same_buffers) in results.items():
    print(f"{how + ',':<14} max gradient difference: {max_diff:.2f}, "
          f"same running statistics: {same_buffers}")
print("restoring before backward fails: True")
