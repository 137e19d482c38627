# --8<-- [start:lesson]
import torch

torch.manual_seed(0)
layer1, layer2 = torch.nn.Linear(3, 4), torch.nn.Linear(4, 1)
x = torch.randn(8, 3)
calls = {"tensor_hook": 0, "module_hook": 0}


def count(name):
    def hook(*args):
        calls[name] += 1

    return hook


module_handle = layer2.register_full_backward_hook(count("module_hook"))
h = layer1(x).tanh()
tensor_handle = h.register_hook(count("tensor_hook"))
loss = layer2(h).pow(2).mean()
loss.backward(retain_graph=True)
tensor_handle.remove()
module_handle.remove()  # (1)!
loss.backward()
print("hook_calls:", calls)
# --8<-- [end:lesson]

# --8<-- [start:proof]
assert calls == {"tensor_hook": 1, "module_hook": 2}
assert module_handle.id not in layer2._backward_hooks  # (1)!
layer2(layer1(x).tanh()).pow(2).mean().backward()
assert calls == {"tensor_hook": 1, "module_hook": 2}  # (2)!
# --8<-- [end:proof]
