# --8<-- [start:shown]
import inspect

import torch
from torch.func import grad, vjp

torch.manual_seed(0)


def f(x):
    return x.exp() * x.sin()


x = torch.randn(3)
u, v = torch.randn(3), torch.randn(3)

# With retain_graph: one graph, two backward passes with different output weights.
xr = x.clone().requires_grad_()
y = f(xr)
(ju,) = torch.autograd.grad(y, xr, grad_outputs=u, retain_graph=True)
(jv,) = torch.autograd.grad(y, xr, grad_outputs=v)

# torch.func.vjp: one forward, and a vjp_fn you may call as often as you like.
y_func, vjp_fn = vjp(f, x)  # (1)!
(ju_func,) = vjp_fn(u)
(jv_func,) = vjp_fn(v)
(ju_again,) = vjp_fn(u)
same = torch.allclose(ju, ju_func) and torch.allclose(jv, jv_func)
assert same and torch.equal(ju_func, ju_again) and torch.equal(y_func, y.detach())
print("vjp_fn(u), vjp_fn(v), vjp_fn(u) match autograd:", same)

default = inspect.signature(vjp_fn).parameters["retain_graph"].default
assert default is True  # (2)!
print("vjp_fn's own retain_graph defaults to:", default)
vjp_fn(v, retain_graph=False)  # (3)!
try:
    vjp_fn(u)
except RuntimeError as error:
    assert str(error).startswith("Trying to backward through the graph a second time")
    print("after vjp_fn(v, retain_graph=False): the graph is freed")
else:
    raise AssertionError("the graph should have been freed")

# torch.func.grad: the gradient as a function; no .grad, no graph left behind.
df = grad(lambda t: f(t).sum())  # (4)!
xg = x.clone().requires_grad_()
f(xg).sum().backward()
assert torch.allclose(df(x), xg.grad)
print("grad(f)(x) == x.grad after backward:", torch.allclose(df(x), xg.grad))

try:
    grad(lambda t: t.exp())(x)  # a function that returns a vector
except RuntimeError as error:
    message = str(error)
else:
    raise AssertionError("grad() should refuse a non-scalar output")
assert "Expected f(*args) to return a scalar Tensor, got tensor with 1 dims" in message
print("grad() of a vector-valued f:", message.split(": ", 1)[1].split(". ")[0] + ".")
# --8<-- [end:shown]

# The graph lives as long as vjp_fn. Watch, through a weak reference, a tensor that the graph
# saved: the multiplication keeps both of its factors for its backward pass.
import weakref

watched = []


def watch(t):
    watched.append(weakref.ref(t))
    return t


_, vjp_fn = vjp(lambda t: watch(t.exp()) * t.sin(), x)
vjp_fn(u)
vjp_fn(v)
assert watched[-1]() is not None  # still saved after two calls: vjp_fn holds the graph
del vjp_fn
assert watched[-1]() is None  # dropping vjp_fn frees it
_, vjp_fn = vjp(lambda t: watch(t.exp()) * t.sin(), x)
vjp_fn(u, retain_graph=False)
assert watched[-1]() is None  # freed by the last call while vjp_fn still exists
_, vjp_fn = vjp(lambda t: watch(t.exp()) + t.sin(), x)
assert watched[-1]() is None  # control: an addition saves nothing, so nothing keeps it alive
print("a tensor the graph saved lives as long as vjp_fn:", True)
