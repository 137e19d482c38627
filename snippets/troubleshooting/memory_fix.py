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


def train(steps, retain_graph):
    held_after_each_step = []
    total_loss = 0.0
    for _ in range(steps):
        x = torch.randn(32, 64)
        loss = torch.tanh(model(x)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward(retain_graph=retain_graph)
        optimizer.step()
        total_loss += loss.item()  # (1)!
        held_after_each_step.append(saved_bytes())
    return held_after_each_step, total_loss


with torch.autograd.graph.saved_tensors_hooks(pack, lambda saved: saved.tensor):
    counts, total_loss = train(5, retain_graph=False)  # (2)!
    assert counts == [0] * 5
    print("bytes held, without retain_graph:", counts)

    counts, _ = train(5, retain_graph=True)  # (3)!
    assert counts == [counts[0]] * 5 and counts[0] > 0
    print("bytes held, retain_graph=True:   ", counts)
print("total_loss is a float:", isinstance(total_loss, float))
