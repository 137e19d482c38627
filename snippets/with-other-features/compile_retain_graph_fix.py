# --8<-- [start:lesson]
import torch
import torch._functorch.config

torch._functorch.config.donated_buffer = False  # (1)!

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
compiled = torch.compile(model, backend="aot_eager")
x = torch.randn(16, 4)

compiled(x).pow(2).mean().backward()  # (2)!
model.zero_grad()

loss = compiled(x).pow(2).mean()
loss.backward(retain_graph=True)  # (3)!
loss.backward()
print("model[0].weight.grad_norm:", round(model[0].weight.grad.norm().item(), 4))
# --8<-- [end:lesson]

# --8<-- [start:proof]
import copy

reference = copy.deepcopy(model)
reference.zero_grad()
eager_loss = reference(x).pow(2).mean()
eager_loss.backward(retain_graph=True)
eager_loss.backward()
for p, q in zip(model.parameters(), reference.parameters(), strict=True):
    assert torch.allclose(p.grad, q.grad, rtol=1e-5, atol=1e-7)  # (1)!

assert compiled(x).grad_fn._forward_cls.metadata.bw_donated_idxs is None  # (2)!

loss = compiled(x).pow(2).mean()
with torch._functorch.config.patch(donated_buffer=True):
    try:
        loss.backward(retain_graph=True)  # (3)!
    except RuntimeError as error:
        assert str(error).startswith("This backward function was compiled with non-empty donated")
    else:
        raise AssertionError("the flag turned back on should have raised, with nothing donated")

torch._dynamo.reset()
compiled = torch.compile(model, backend="aot_eager")
loss = compiled(x).pow(2).mean()
loss.backward(retain_graph=True)  # (4)!
loss.backward()
assert compiled(x).grad_fn._forward_cls.metadata.bw_donated_idxs == []
loss = compiled(x).pow(2).mean()
with torch._functorch.config.patch(donated_buffer=True):
    loss.backward(retain_graph=True)
# --8<-- [end:proof]
