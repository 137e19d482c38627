# --8<-- [start:lesson]
import torch
from torch.func import jacrev, vjp, vmap

torch.manual_seed(0)


def f(x):
    return (x.unsqueeze(0) * torch.arange(1.0, 5.0).unsqueeze(1)).sin().sum(dim=1)  # (1)!


x = torch.randn(3)

jac = jacrev(f)(x)  # (2)!
_, vjp_fn = vjp(f, x)
(jac_vmap,) = vmap(vjp_fn)(torch.eye(4))  # (3)!
print("jac.shape:", tuple(jac.shape))
for row in jac.tolist():
    print(*(f"{value:8.4g}" for value in row))
# --8<-- [end:lesson]

# --8<-- [start:proof]
xr = x.clone().requires_grad_()
y = f(xr)
rows = []
for i in range(y.numel()):
    last = i == y.numel() - 1
    (row,) = torch.autograd.grad(y[i], xr, retain_graph=not last)  # (1)!
    rows.append(row)
jac_loop = torch.stack(rows)

assert torch.allclose(jac, jac_loop) and torch.allclose(jac_vmap, jac_loop)  # (2)!
# --8<-- [end:proof]
