import torch

torch.manual_seed(0)

x = torch.randn(2, 3)
W1 = torch.randn(3, 4, requires_grad=True)
W2 = torch.randn(4, 1, requires_grad=True)

h = (x @ W1).relu()  # (1)!
loss_1 = (h @ W2).pow(2).mean()
loss_1.backward()

loss_2 = (h @ W2).pow(2).mean()  # (2)!
assert loss_2.grad_fn is not loss_1.grad_fn
try:
    loss_2.backward()  # (3)!
except RuntimeError as error:
    assert str(error).startswith("Trying to backward through the graph a second time")
    print("recomputed only the head:", str(error).split(" (")[0])
else:
    raise AssertionError("the part of the graph behind h was freed by the first backward")

h = (x @ W1).relu()  # (4)!
loss_3 = (h @ W2).pow(2).mean()
loss_3.backward()
print("recomputed from the leaves: backward ran")
