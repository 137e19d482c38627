# --8<-- [start:lesson]
import torch

torch.manual_seed(0)
cell = torch.nn.RNNCell(4, 8)
optimizer = torch.optim.SGD(cell.parameters(), lr=0.1)
h = torch.zeros(1, 8)

for step in range(3):
    x = torch.randn(1, 4)
    h = cell(x, h)
    loss = h.pow(2).mean()
    optimizer.zero_grad()
    try:
        loss.backward(retain_graph=True)  # (1)!
    except RuntimeError as error:
        message = str(error)
        print(f"step {step}:", message.split(":")[0])
        break
    print(f"step {step}: backward ok")
    optimizer.step()  # (2)!
# --8<-- [end:lesson]

# --8<-- [start:proof]
assert step == 2  # (1)!
assert message.startswith("one of the variables needed for gradient computation has been modified")


def weights_saved(x, h):  # (2)!
    packed = []

    def pack(t):
        packed.append(t.untyped_storage().data_ptr())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        cell(x, h)
    return [n for n, p in cell.named_parameters() if p.untyped_storage().data_ptr() in packed]


torch.manual_seed(0)
cell = torch.nn.RNNCell(4, 8)
optimizer = torch.optim.SGD(cell.parameters(), lr=0.1)
h = torch.zeros(1, 8)
saved = []
for replayed in range(3):
    x = torch.randn(1, 4)
    saved.append(weights_saved(x, h))
    h = cell(x, h)
    optimizer.zero_grad()
    try:
        h.pow(2).mean().backward(retain_graph=True)
    except RuntimeError as error:
        assert str(error) == message
        failed_at = replayed
        break
    optimizer.step()
assert failed_at == step
assert saved == [[], ["weight_hh"], ["weight_hh"]]  # (3)!
# --8<-- [end:proof]
