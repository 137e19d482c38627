# --8<-- [start:lesson]
import torch

torch.manual_seed(0)
layer1, layer2 = torch.nn.Linear(3, 4), torch.nn.Linear(4, 1)
x = torch.randn(8, 3)
at_h, at_layer2, forward_calls = [], [], []


def backward_hook(module, grad_input, grad_output):  # (1)!
    at_layer2.append(grad_output[0].clone())


layer2.register_forward_hook(lambda module, inputs, output: forward_calls.append(1))
layer2.register_full_backward_hook(backward_hook)
h = layer1(x).tanh()
h.retain_grad()  # (2)!
h.register_hook(lambda grad: at_h.append(grad.clone()))  # (3)!
loss = layer2(h).pow(2).mean()

loss.backward(retain_graph=True)
first_h_grad, first_w_grad = h.grad.clone(), layer1.weight.grad.clone()
loss.backward()  # (4)!
print("h_tensor_hook_calls:     ", len(at_h))
print("layer2_backward_hook_calls:", len(at_layer2))
print("layer2_forward_hook_calls: ", len(forward_calls))
print("h.grad_2_passes / h.grad_1_pass:", (h.grad / first_h_grad).unique().tolist())
# --8<-- [end:lesson]

# --8<-- [start:proof]
assert len(at_h) == 2 and len(at_layer2) == 2
assert len(forward_calls) == 1  # (1)!
assert torch.equal(at_h[0], at_h[1]) and torch.equal(at_h[0], first_h_grad)  # (2)!
assert torch.equal(at_layer2[0], at_layer2[1])
assert torch.equal(h.grad, 2 * first_h_grad)  # (3)!
assert torch.equal(layer1.weight.grad, 2 * first_w_grad)

fresh1, fresh2 = torch.nn.Linear(3, 4), torch.nn.Linear(4, 1)
fresh1.load_state_dict(layer1.state_dict())
fresh2.load_state_dict(layer2.state_dict())
(reference,) = torch.autograd.grad(fresh2(fresh1(x).tanh()).pow(2).mean(), fresh1.weight)
assert torch.allclose(first_w_grad, reference, rtol=1e-5, atol=1e-7)  # (4)!

layer1.zero_grad()
assert layer1.weight.grad is None and layer1.bias.grad is None
assert torch.equal(h.grad, 2 * first_h_grad)  # (5)!
layer2(layer1(x).tanh()).pow(2).mean().backward()
optimizer = torch.optim.SGD([*layer1.parameters(), *layer2.parameters()], lr=0.1)
assert all(p.grad is not None for p in optimizer.param_groups[0]["params"])
optimizer.zero_grad()
assert all(p.grad is None for p in optimizer.param_groups[0]["params"])
assert torch.equal(h.grad, 2 * first_h_grad)  # (6)!
# --8<-- [end:proof]
