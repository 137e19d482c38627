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
        break
    print(f"step {step}: backward ok")
    optimizer.step()  # (2)!
else:
    raise AssertionError("a backward should have failed")

assert step == 2  # (3)!
assert message.startswith("one of the variables needed for gradient computation has been modified")
print(f"step {step}:", message.split(":")[0])
