import weakref

import torch

torch.manual_seed(0)

x = torch.randn(64, 256)
W1 = torch.randn(256, 256, requires_grad=True)
W2 = torch.randn(256, 1, requires_grad=True)

held = weakref.WeakSet()  # (1)!


class Saved:
    def __init__(self, tensor):
        self.tensor = tensor.detach()  # the same memory, without a link back to the graph


def pack(tensor):
    box = Saved(tensor)
    held.add(box)
    return box


def unpack(box):
    return box.tensor


def forward():
    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        hidden = (x @ W1).tanh()
        return (hidden @ W2).pow(2).mean(), hidden


def live():
    return len(held)


loss, hidden = forward()
after_forward = live()
loss.backward()  # (2)!
after_plain_backward = live()

loss, hidden = forward()  # (3)!
loss.backward(retain_graph=True)
after_retained_backward = live()
del loss  # (4)!
after_del_loss = live()
del hidden  # (5)!
after_del_hidden = live()

assert after_forward == 5
assert after_plain_backward == 0
assert after_retained_backward == after_forward
assert after_del_loss == 2
assert after_del_hidden == 0
print("saved tensors alive after the forward pass:", after_forward)
print("... after backward():                      ", after_plain_backward)
print("... after backward(retain_graph=True):     ", after_retained_backward)
print("... after del loss (hidden still held):    ", after_del_loss)
print("... after del hidden, the last reference:  ", after_del_hidden)
