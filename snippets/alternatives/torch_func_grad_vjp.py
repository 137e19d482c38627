# --8<-- [start:lesson]
import torch
from torch.func import grad, vjp

torch.manual_seed(0)


def f(x):
    return x.exp() * x.sin()


x = torch.randn(3)
u, v = torch.randn(3), torch.randn(3)

y, vjp_fn = vjp(f, x)  # (1)!
(ju,) = vjp_fn(u)  # (2)!
(jv,) = vjp_fn(v)
(ju_last,) = vjp_fn(u, retain_graph=False)  # (3)!
print("vjp_fn(u):", *(f"{value:.4g}" for value in ju.tolist()))
print("vjp_fn(v):", *(f"{value:.4g}" for value in jv.tolist()))

df = grad(lambda t: f(t).sum())  # (4)!
print("grad(f)(x):", *(f"{value:.4g}" for value in df(x).tolist()))
# --8<-- [end:lesson]

# --8<-- [start:proof]
import inspect
import weakref

xr = x.clone().requires_grad_()
y_ref = f(xr)
(ju_ref,) = torch.autograd.grad(y_ref, xr, grad_outputs=u, retain_graph=True)  # (1)!
(jv_ref,) = torch.autograd.grad(y_ref, xr, grad_outputs=v)
assert torch.allclose(ju, ju_ref) and torch.allclose(jv, jv_ref)
assert torch.equal(ju, ju_last) and torch.equal(y, y_ref.detach())

try:
    vjp_fn(v)  # (2)!
except RuntimeError as error:
    assert str(error).startswith("Trying to backward through the graph a second time")
else:
    raise AssertionError("the graph should have been freed")
_, vjp_fn = vjp(f, x)
assert inspect.signature(vjp_fn).parameters["retain_graph"].default is True  # (3)!

xg = x.clone().requires_grad_()
f(xg).sum().backward()
assert torch.allclose(df(x), xg.grad)  # (4)!
try:
    grad(lambda t: t.exp())(x)
except RuntimeError as error:
    message = str(error)
else:
    raise AssertionError("grad() should refuse a non-scalar output")
assert "Expected f(*args) to return a scalar Tensor, got tensor with 1 dims" in message

watched = []


def watch(t):
    watched.append(weakref.ref(t))
    return t


_, vjp_fn = vjp(lambda t: watch(t.exp()) * t.sin(), x)  # (5)!
vjp_fn(u)
vjp_fn(v)
assert watched[-1]() is not None
del vjp_fn
assert watched[-1]() is None
_, vjp_fn = vjp(lambda t: watch(t.exp()) * t.sin(), x)
vjp_fn(u, retain_graph=False)
assert watched[-1]() is None
_, vjp_fn = vjp(lambda t: watch(t.exp()) + t.sin(), x)  # (6)!
assert watched[-1]() is None

assert inspect.signature(vjp_fn).parameters["create_graph"].default is None  # (7)!
assert not (y.requires_grad or ju.requires_grad or df(x).requires_grad)
y_r, vjp_fn = vjp(f, xr)
(ju_r,) = vjp_fn(u)
assert y_r.grad_fn is not None and ju_r.grad_fn is not None
assert grad(lambda t: f(t).sum())(xr).grad_fn is not None
(ju_plain,) = vjp_fn(u, create_graph=False)
with torch.no_grad():
    (ju_no_grad,) = vjp_fn(u)
assert not ju_plain.requires_grad and not ju_no_grad.requires_grad
# --8<-- [end:proof]
