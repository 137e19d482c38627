import torch

torch.manual_seed(0)
layer1, layer2 = torch.nn.Linear(3, 4), torch.nn.Linear(4, 1)
x = torch.randn(8, 3)

# --8<-- [start:show]
seen = {"h.register_hook": [], "layer2 backward hook": [], "layer2 forward hook": 0}


def forward_hook(module, inputs, output):
    seen["layer2 forward hook"] += 1


def backward_hook(module, grad_input, grad_output):
    seen["layer2 backward hook"].append(grad_output[0].clone())


layer2.register_forward_hook(forward_hook)
layer2.register_full_backward_hook(backward_hook)  # (1)!

h = layer1(x).tanh()
h.retain_grad()  # (2)!
h.register_hook(lambda grad: seen["h.register_hook"].append(grad.clone()))  # (3)!
loss = layer2(h).pow(2).mean()

loss.backward(retain_graph=True)
first_h_grad, first_w_grad = h.grad.clone(), layer1.weight.grad.clone()
loss.backward()  # (4)!
# --8<-- [end:show]

tensor_grads, module_grads = seen["h.register_hook"], seen["layer2 backward hook"]
assert len(tensor_grads) == 2 and len(module_grads) == 2
assert seen["layer2 forward hook"] == 1  # the second backward runs no forward code
# Each call of a hook gets the gradient of its own pass, the same both times...
assert torch.equal(tensor_grads[0], tensor_grads[1]) and torch.equal(tensor_grads[0], first_h_grad)
assert torch.equal(module_grads[0], module_grads[1])
# ...while .grad adds the two passes up, for the retained non-leaf h as for a parameter.
assert torch.equal(h.grad, 2 * first_h_grad)
assert torch.equal(layer1.weight.grad, 2 * first_w_grad)
print("h.register_hook:           called", len(tensor_grads), "times, same gradient each time")
print("layer2 full backward hook: called", len(module_grads), "times, same gradient each time")
print("layer2 forward hook:       called", seen["layer2 forward hook"], "time")
print("h.grad after two passes / after one:", (h.grad / first_h_grad).unique().tolist())

# The first pass's gradient is the right one: a fresh pass, without the hooks, gives it too.
fresh1, fresh2 = torch.nn.Linear(3, 4), torch.nn.Linear(4, 1)
fresh1.load_state_dict(layer1.state_dict())
fresh2.load_state_dict(layer2.state_dict())
(reference,) = torch.autograd.grad(fresh2(fresh1(x).tanh()).pow(2).mean(), fresh1.weight)
assert torch.allclose(first_w_grad, reference, rtol=1e-5, atol=1e-7)

# zero_grad() clears the parameters' .grad, not the .grad of a retained non-leaf tensor.
layer1.zero_grad()
layer2.zero_grad()
optimizer = torch.optim.SGD([*layer1.parameters(), *layer2.parameters()], lr=0.1)
optimizer.zero_grad()
assert layer1.weight.grad is None and layer2.weight.grad is None
assert h.grad is not None
print("after zero_grad() of the layers and of an optimizer: h.grad is still set")
h.grad = None

