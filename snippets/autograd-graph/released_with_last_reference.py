# --8<-- [start:lesson]
import weakref

import torch

torch.manual_seed(0)
x = torch.randn(64, 256)
W1, W2 = torch.randn(256, 256, requires_grad=True), torch.randn(256, 1, requires_grad=True)
held = weakref.WeakSet()  # (1)!


class Saved:
    def __init__(self, tensor):
        self.tensor = tensor.detach()  # (2)!
        held.add(self)


with torch.autograd.graph.saved_tensors_hooks(Saved, lambda saved: saved.tensor):  # (3)!
    loss = ((x @ W1).tanh() @ W2).pow(2).mean()
    print("after: forward | saved_tensors_alive:", len(held))
    loss.backward()  # (4)!
    print("after: backward() | saved_tensors_alive:", len(held))
    hidden = (x @ W1).tanh()  # (5)!
    loss = (hidden @ W2).pow(2).mean()
    loss.backward(retain_graph=True)
    print("after: backward(retain_graph=True) | saved_tensors_alive:", len(held))
    del loss  # (6)!
    print("after: del loss | saved_tensors_alive:", len(held))
    del hidden  # (7)!
    print("after: del hidden | saved_tensors_alive:", len(held))
# --8<-- [end:lesson]

# --8<-- [start:proof]
import gc  # noqa: E402

gc.disable()
with torch.autograd.graph.saved_tensors_hooks(Saved, lambda saved: saved.tensor):
    loss = ((x @ W1).tanh() @ W2).pow(2).mean()
    assert len(held) == 5
    loss.backward()
    assert len(held) == 0
    hidden = (x @ W1).tanh()
    loss = (hidden @ W2).pow(2).mean()
    assert len(held) == 5
    loss.backward(retain_graph=True)
    assert len(held) == 5
    del loss
    assert len(held) == 2
    del hidden
    assert len(held) == 0  # (1)!
    loss = ((x @ W1).tanh() @ W2).pow(2).mean()
    loss.backward(retain_graph=True)
    node = loss.grad_fn
    del loss
    assert len(held) == 5  # (2)!
    del node
    assert len(held) == 0
    loss = ((x @ W1).tanh() @ W2).pow(2).mean()
    nodes, tensors = [loss.grad_fn], 0
    while nodes:
        node = nodes.pop()
        nodes += [n for n, _ in node.next_functions if n is not None]
        names = [a for a in dir(node) if a.startswith("_saved_")]
        tensors += sum(isinstance(getattr(node, a), torch.Tensor) for a in names)
    assert tensors == len(held) == 5  # (3)!
    del loss, node
    doubled = W2 * 2
    assert len(held) == 0 and torch.equal(doubled.grad_fn._saved_other, torch.tensor(2))  # (4)!
    loss = ((x @ W1).tanh() @ W2).pow(2).mean()
    loss.backward(retain_graph=True)
    assert len(held) == 5
    loss.backward()  # (5)!
    assert len(held) == 0 and loss.grad_fn is not None
    del loss
    loss = ((x @ W1).tanh() @ W2).pow(2).mean()
    loss.backward(retain_graph=True)
    torch.autograd.grad(loss, W2)  # (6)!
    assert len(held) == 2
    del loss
    assert len(held) == 0
gc.enable()
# --8<-- [end:proof]
