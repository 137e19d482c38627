# --8<-- [start:lesson]
import torch

torch.manual_seed(0)
cell = torch.nn.RNNCell(4, 8)
optimizer = torch.optim.SGD(cell.parameters(), lr=0.1)
h = torch.zeros(1, 8)

for step in range(3):
    x = torch.randn(1, 4)
    h = cell(x, h)  # (1)!
    loss = h.pow(2).mean()
    optimizer.zero_grad()
    try:
        loss.backward()  # (2)!
    except RuntimeError as error:
        message = str(error)
        print(f"step: {step} | error:", message.replace(". ", ".\n"))
        break
    print(f"step: {step} | backward: ok")
    optimizer.step()
# --8<-- [end:lesson]

# --8<-- [start:proof]
assert step == 1  # (1)!
assert message.startswith("Trying to backward through the graph a second time")
# --8<-- [end:proof]
