# --8<-- [start:lesson]
import weakref

import torch


class SavedBytes(torch.autograd.graph.saved_tensors_hooks):  # (1)!
    def __init__(self, *keep):
        self.ignored = {t.untyped_storage().data_ptr() for t in keep}  # (2)!
        self.live, self.peak = weakref.WeakValueDictionary(), 0
        super().__init__(self.pack, lambda saved: saved[0] if isinstance(saved, tuple) else saved)

    def __enter__(self):
        super().__enter__()
        return self

    def pack(self, t):
        if t.untyped_storage().data_ptr() in self.ignored:
            return t
        storage = self.live.setdefault(t.untyped_storage().data_ptr(), t.detach())  # (3)!
        self.peak = max(self.peak, self.held())
        return t.detach(), storage  # (4)!

    def held(self):
        return sum(s.untyped_storage().nbytes() for s in self.live.values())


if __name__ == "__main__":
    with SavedBytes() as meter:
        loss = torch.randn(1000, requires_grad=True).exp().sum()
    print("held_bytes:", meter.held(), "| peak_bytes:", meter.peak)
# --8<-- [end:lesson]


# --8<-- [start:proof]
class Handle:
    def __init__(self, meter, t):
        self.meter, self.t = meter, t.detach()
        self.key, self.size = t.untyped_storage().data_ptr(), t.untyped_storage().nbytes()
        if meter.live.get(self.key, 0) == 0:
            meter.current += self.size
            meter.peak = max(meter.peak, meter.current)
        meter.live[self.key] = meter.live.get(self.key, 0) + 1

    def __del__(self):
        self.meter.live[self.key] -= 1
        if self.meter.live[self.key] == 0:
            self.meter.current -= self.size


class ReferenceMeter:  # (1)!
    def __init__(self, ignore):
        self.ignored = {t.untyped_storage().data_ptr() for t in ignore}
        self.live, self.current, self.peak = {}, 0, 0

    def pack(self, t):
        ignored = t.untyped_storage().data_ptr() in self.ignored
        return t if ignored else Handle(self, t)

    def unpack(self, packed):
        return packed if isinstance(packed, torch.Tensor) else packed.t


def compare(step, *keep):
    reference = ReferenceMeter(keep)
    with torch.autograd.graph.saved_tensors_hooks(reference.pack, reference.unpack):
        kept = step()
        expected = (reference.peak, reference.current)
    del kept
    assert reference.current == 0
    with SavedBytes(*keep) as meter:
        kept = step()
    assert (meter.peak, meter.held()) == expected
    del kept
    assert meter.held() == 0  # (2)!
    return expected


assert compare(lambda: torch.randn(1000, requires_grad=True).exp().sum()) == (4000, 4000)

layer, inputs = torch.nn.Linear(16, 16), torch.randn(8, 16)
keep = [*layer.parameters(), inputs]
assert compare(lambda: layer(torch.tanh(layer(inputs))).sum(), *keep) == (512, 512)  # (3)!


def freed_by_backward():
    loss = layer(torch.tanh(layer(inputs))).sum()
    loss.backward()
    return loss


assert compare(freed_by_backward, *keep) == (512, 0)


def peak_before_last_pack():
    freed_by_backward()
    return layer(inputs)[:2].exp().sum()


assert compare(peak_before_last_pack, *keep) == (512, 128)

a = torch.randn(4, 6, requires_grad=True)
(expected,) = torch.autograd.grad(((a * 2)[:, :3] * (a * 2)[:, 3:]).sum(), a)
with SavedBytes(a) as meter:
    b = a * 2
    loss = (b[:, :3] * b[:, 3:]).sum()
assert meter.held() == meter.peak == b.untyped_storage().nbytes() == 96
(got,) = torch.autograd.grad(loss, a)
assert torch.equal(got, expected)  # (4)!
assert compare(lambda: ((a * 2)[:, :3] * (a * 2)[:, 3:]).sum(), a) == (192, 192)

with SavedBytes() as meter:
    doubled = torch.randn(1000, requires_grad=True) * 2
assert meter.held() == meter.peak == 0
assert torch.equal(doubled.grad_fn._saved_other, torch.tensor(2))  # (5)!
# --8<-- [end:proof]
