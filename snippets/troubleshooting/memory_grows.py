import itertools
import weakref

import torch

torch.manual_seed(0)

# A meter: every tensor autograd saves for a backward pass goes through pack(); we keep a
# weak reference to what it stores, so we can count what the graphs still hold.
held = weakref.WeakSet()


class Saved:
    def __init__(self, tensor):
        self.tensor = tensor.detach()  # same storage, no reference back to the graph


def pack(tensor):
    saved = Saved(tensor)
    held.add(saved)
    return saved


def saved_bytes():
    storages = {}  # tensors that share memory count once
    for saved in held:
        storage = saved.tensor.untyped_storage()
        storages[storage.data_ptr()] = storage.nbytes()
    return sum(storages.values())


model = torch.nn.Linear(64, 64)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
history = []
with torch.autograd.graph.saved_tensors_hooks(pack, lambda saved: saved.tensor):
    total_loss = 0
    for step in range(5):
        x = torch.randn(32, 64)
        loss = torch.tanh(model(x)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward(retain_graph=True)  # (1)!
        optimizer.step()
        total_loss += loss  # (2)!
        history.append(saved_bytes())
        print(f"after step {step}: {history[-1]:6} bytes of saved tensors still held")

    assert history[0] == 2 * x.nbytes  # per step: the batch x and tanh's output, same size
    assert all(b - a == history[0] for a, b in itertools.pairwise(history))  # (3)!
    del total_loss, loss  # (4)!
    assert saved_bytes() == 0
    print("after dropping total_loss and loss:", saved_bytes(), "bytes")
