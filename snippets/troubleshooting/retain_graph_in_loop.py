import torch

torch.manual_seed(0)

cell = torch.nn.RNNCell(4, 8)
optimizer = torch.optim.SGD(cell.parameters(), lr=0.1)
h = torch.zeros(1, 8)


def weights_saved(x, h):
    """The parameters this step's forward pass saves for backward (found in a probe run:
    saved tensors that go through hooks skip the in-place check, so the real one has none)."""
    packed = []

    def pack(t):
        packed.append(t.untyped_storage().data_ptr())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        cell(x, h)
    return [n for n, p in cell.named_parameters() if p.untyped_storage().data_ptr() in packed]


saved = []
for step in range(3):
    x = torch.randn(1, 4)
    saved.append(weights_saved(x, h))
    h = cell(x, h)
    loss = h.pow(2).mean()
    optimizer.zero_grad()
    try:
        loss.backward(retain_graph=True)  # (1)!
    except RuntimeError as error:
        message = str(error)
        break
    print(f"step {step}: backward ok")
    optimizer.step()  # (2)!
else:
    raise AssertionError("a backward should have failed")

assert step == 2  # (3)!
assert saved == [[], ["weight_hh"], ["weight_hh"]]
assert message.startswith("one of the variables needed for gradient computation has been modified")
print(f"step {step}:", message.split(":")[0])
print("weights saved by the graphs of steps 0, 1, 2:", saved)
