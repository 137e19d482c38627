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


def first_retaining_backward(run, inputs):
    try:
        run(inputs).pow(2).mean().backward(retain_graph=True)
    except RuntimeError as error:
        return str(error)


assert first_retaining_backward(fresh, torch.randn(5, 4)) == message  # (4)!
torch._dynamo.reset()
dynamic = torch.compile(model, backend="aot_eager", dynamic=True)
assert first_retaining_backward(dynamic, x) == message  # (5)!
torch._dynamo.reset()
marked = torch.randn(16, 4)
torch._dynamo.mark_dynamic(marked, 0)
assert first_retaining_backward(torch.compile(model, backend="aot_eager"), marked) == message

torch._dynamo.reset()
torch._functorch.config.donated_buffer = False  # (6)!
grads = []
for run in (torch.compile(model, backend="aot_eager", dynamic=True), model):
    model.zero_grad()
    loss = run(x).pow(2).mean()
    loss.backward(retain_graph=True)
    loss.backward()
    grads.append([p.grad.clone() for p in model.parameters()])
assert all(torch.allclose(a, b, rtol=1e-5, atol=1e-7) for a, b in zip(*grads, strict=True))
torch._functorch.config.donated_buffer = True
assert time.perf_counter() - started < 20
# --8<-- [end:proof]
