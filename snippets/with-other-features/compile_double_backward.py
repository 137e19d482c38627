# --8<-- [start:lesson]
import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
compiled = torch.compile(model, backend="aot_eager")
x = torch.randn(16, 4, requires_grad=True)

(grad_x,) = torch.autograd.grad(compiled(x).sum(), x, create_graph=True)  # (1)!
penalty = grad_x.pow(2).sum()
try:
    penalty.backward()  # (2)!
except RuntimeError as error:
    message = str(error)
    print(message)

(eager_grad_x,) = torch.autograd.grad(model(x).sum(), x, create_graph=True)  # (3)!
eager_grad_x.pow(2).sum().backward()
print("eager | model[0].weight.grad_norm:", round(model[0].weight.grad.norm().item(), 4))
# --8<-- [end:lesson]

# --8<-- [start:proof]
assert message == "torch.compile with aot_autograd does not currently support double backward"

assert torch.allclose(grad_x, eager_grad_x, rtol=1e-5, atol=1e-7)  # (1)!

w1 = model[0].weight.detach().clone()
model.zero_grad()
(grad_x,) = torch.autograd.grad(model(x).sum(), x, create_graph=True)
grad_x.pow(2).sum().backward()


def penalty_of(w):
    params = dict(model.named_parameters())
    params["0.weight"] = w

    def out(inp):
        return torch.func.functional_call(model, params, (inp,)).sum()

    return torch.func.grad(out)(x.detach()).pow(2).sum()


expected = torch.func.grad(penalty_of)(w1)
assert torch.allclose(model[0].weight.grad, expected, rtol=1e-5, atol=1e-7)  # (2)!
# --8<-- [end:proof]
