# --8<-- [start:lesson]
import torch

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
    print(message.replace(". ", ".\n"))
# --8<-- [end:lesson]

# --8<-- [start:proof]
import time

started = time.perf_counter()
assert message.startswith("This backward function was compiled with non-empty donated buffers")
assert "torch._functorch.config.donated_buffer=False" in message

try:
    torch.autograd.grad(compiled(x).pow(2).mean(), model[0].weight, create_graph=True)  # (1)!
    raise AssertionError("create_graph=True should have raised the donated-buffer error")
except RuntimeError as error:
    assert str(error) == message

torch._functorch.config.donated_buffer = False
compiled(x).sum().backward(retain_graph=True)  # (2)!
assert compiled(x).grad_fn._forward_cls.metadata.bw_donated_idxs
torch._functorch.config.donated_buffer = True

torch._dynamo.reset()
fresh = torch.compile(model, backend="aot_eager")
loss = fresh(x).pow(2).mean()
loss.backward(retain_graph=True)  # (3)!
loss.backward()

loss = fresh(torch.randn(5, 4)).pow(2).mean()
try:
    loss.backward(retain_graph=True)  # (4)!
    raise AssertionError("a new batch size should recompile with a backward that refuses")
except RuntimeError as error:
    assert str(error) == message

torch._dynamo.reset()
dynamic = torch.compile(model, backend="aot_eager", dynamic=True)
loss = dynamic(x).pow(2).mean()
try:
    loss.backward(retain_graph=True)  # (5)!
    raise AssertionError("a dynamic-shape compile should refuse its first retaining backward")
except RuntimeError as error:
    assert str(error) == message

torch._dynamo.reset()
torch._functorch.config.donated_buffer = False  # (6)!
model.zero_grad()
loss = torch.compile(model, backend="aot_eager", dynamic=True)(x).pow(2).mean()
loss.backward(retain_graph=True)
loss.backward()
compiled_grads = [p.grad.clone() for p in model.parameters()]
model.zero_grad()
loss = model(x).pow(2).mean()
loss.backward(retain_graph=True)
loss.backward()
for got, p in zip(compiled_grads, model.parameters(), strict=True):
    assert torch.allclose(got, p.grad, rtol=1e-5, atol=1e-7)
torch._functorch.config.donated_buffer = True
assert time.perf_counter() - started < 20
# --8<-- [end:proof]
