import torch

torch.manual_seed(0)

w = torch.randn(3, requires_grad=True)
x = torch.randn(3)
loss = (w * x).exp().sum()
exp_node = loss.grad_fn.next_functions[0][0]  # ExpBackward0, which saved exp()'s result


def saved_result_freed():
    try:
        _ = exp_node._saved_result
    except RuntimeError:
        return True
    return False


loss.backward(retain_graph=True)  # (1)!
first = w.grad.clone()
assert not saved_result_freed()

loss.backward()  # (2)!
assert saved_result_freed()

assert torch.allclose(w.grad, 2 * first)  # (3)!
print("after one backward: ", first)
print("after two backwards:", w.grad)
