import torch


def run(recompute):
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Linear(10, 5), torch.nn.BatchNorm1d(5), torch.nn.Linear(5, 2)
    )
    criterion = torch.nn.CrossEntropyLoss()
    inputs = torch.randn(3, 10)
    labels = torch.LongTensor([1, 0, 1])

    loss = criterion(net(inputs), labels)
    if recompute:
        loss.backward()
        loss = criterion(net(inputs), labels)  # (1)!
        loss.backward()
    else:
        loss.backward(retain_graph=True)
        loss.backward()
    return net


retained, recomputed = run(recompute=False), run(recompute=True)
bn_retained, bn_recomputed = retained[1], recomputed[1]

# In training mode the output uses the batch's own statistics, so the gradients agree ...
pairs = zip(retained.parameters(), recomputed.parameters(), strict=True)
same = all(torch.equal(a.grad, b.grad) for a, b in pairs)
assert same
# ... but every forward pass moves the running statistics once more.
assert bn_retained.num_batches_tracked.item() == 1
assert bn_recomputed.num_batches_tracked.item() == 2
assert not torch.allclose(bn_retained.running_mean, bn_recomputed.running_mean)
assert not torch.allclose(bn_retained.running_var, bn_recomputed.running_var)

print("same gradients:", same)
print("num_batches_tracked, retain:", bn_retained.num_batches_tracked.item(),
      " recompute:", bn_recomputed.num_batches_tracked.item())
print("running_mean, retain:   ", bn_retained.running_mean.numpy().round(4))
print("running_mean, recompute:", bn_recomputed.running_mean.numpy().round(4))
print("running_var,  retain:   ", bn_retained.running_var.numpy().round(4))
print("running_var,  recompute:", bn_recomputed.running_var.numpy().round(4))
