import time

import torch

started = time.perf_counter()
message = None  # stays None if nothing raises
# --8<-- [start:shown]
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
compiled = torch.compile(model, backend="aot_eager")  # (1)!
x = torch.randn(16, 4)

compiled(x).pow(2).mean().backward()  # (2)!

loss = compiled(x).pow(2).mean()
try:
    loss.backward(retain_graph=True)  # (3)!
except RuntimeError as error:
    message = str(error)
# --8<-- [end:shown]

assert message is not None, "backward(retain_graph=True) should have raised"
assert message.startswith("This backward function was compiled with non-empty donated buffers")
assert "torch._functorch.config.donated_buffer=False" in message
print(message.replace(". ", ".\n"))

# create_graph=True keeps the graph too, so it trips the same check.
try:
    torch.autograd.grad(compiled(x).pow(2).mean(), model[0].weight, create_graph=True)
    raise AssertionError("create_graph=True should have raised the donated-buffer error")
except RuntimeError as error:
    assert str(error) == message

# Only an ordinary backward compiled the backward graph with donated buffers. In a fresh
# compile whose FIRST backward keeps the graph, there is no error.
torch._dynamo.reset()
fresh = torch.compile(model, backend="aot_eager")
loss = fresh(x).pow(2).mean()
loss.backward(retain_graph=True)
loss.backward()
print("fresh compile, first backward with retain_graph=True: no error")

elapsed = time.perf_counter() - started
assert elapsed < 20, elapsed
