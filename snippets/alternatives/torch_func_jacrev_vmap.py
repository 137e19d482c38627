import torch
from torch.func import jacrev, vjp, vmap

torch.manual_seed(0)


def f(x):
    return (x.unsqueeze(0) * torch.arange(1.0, 5.0).unsqueeze(1)).sin().sum(dim=1)  # R^3 -> R^4


x = torch.randn(3)

# With retain_graph: the Jacobian one row at a time, one backward pass per output.
xr = x.clone().requires_grad_()
y = f(xr)
rows = []
for i in range(y.numel()):
    last = i == y.numel() - 1
    (row,) = torch.autograd.grad(y[i], xr, retain_graph=not last)  # (1)!
    rows.append(row)
jac_loop = torch.stack(rows)

jac = jacrev(f)(x)  # (2)!

_, vjp_fn = vjp(f, x)
(jac_vmap,) = vmap(vjp_fn)(torch.eye(4))  # (3)!

assert torch.allclose(jac, jac_loop) and torch.allclose(jac_vmap, jac_loop)
print("Jacobian shape:", tuple(jac.shape))
print("jacrev == row-by-row loop:   ", torch.allclose(jac, jac_loop))
print("vmap(vjp_fn) == row-by-row loop:", torch.allclose(jac_vmap, jac_loop))
