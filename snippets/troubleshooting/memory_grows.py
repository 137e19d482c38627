# --8<-- [start:lesson]
import weakref

import torch

torch.manual_seed(0)
model = torch.nn.Linear(64, 64)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
held = weakref.WeakValueDictionary()


def pack(tensor):  # (1)!
    saved = tensor.detach()
    held[id(saved)] = saved
    return saved


total_loss, history = 0, []
with torch.autograd.graph.saved_tensors_hooks(pack, lambda saved: saved):
    for _ in range(5):
        loss = torch.tanh(model(torch.randn(32, 64))).mean()
        optimizer.zero_grad()
        loss.backward(retain_graph=True)  # (2)!
        optimizer.step()
        total_loss += loss  # (3)!
        history.append(sum(t.nbytes for t in held.values()))
print("saved_bytes_per_step:", history)
del total_loss, loss  # (4)!
print("saved_bytes_after_del:", sum(t.nbytes for t in held.values()))
# --8<-- [end:lesson]

# --8<-- [start:proof]
import itertools

x = torch.randn(32, 64)
saved_now = []
with torch.autograd.graph.saved_tensors_hooks(lambda t: saved_now.append(t) or t, lambda t: t):
    activations = torch.tanh(model(x))
    activations.mean()
assert [t.data_ptr() for t in saved_now] == [x.data_ptr(), activations.data_ptr()]  # (1)!
assert x.nbytes == activations.nbytes == 8192
detached = activations.detach()
assert detached.data_ptr() == activations.data_ptr() and detached.grad_fn is None
assert history[0] == 2 * 8192  # (2)!
assert all(b - a == history[0] for a, b in itertools.pairwise(history))
assert sum(t.nbytes for t in held.values()) == 0
# --8<-- [end:proof]
