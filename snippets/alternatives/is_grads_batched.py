import torch
from torch import nn

torch.manual_seed(0)

trunk = nn.Sequential(nn.Linear(4, 8), nn.Tanh())
heads = nn.ModuleList(nn.Linear(8, 1) for _ in range(3))
x, targets = torch.randn(16, 4), torch.randn(3, 16, 1)
shared = list(trunk.parameters())


def task_losses():
    features = trunk(x)
    losses = [(head(features) - t).pow(2).mean() for head, t in zip(heads, targets, strict=True)]
    return torch.stack(losses)


# With retain_graph: one backward pass per task over the shared trunk.
losses = task_losses()
per_task_loop = []
for i in range(3):
    grads = torch.autograd.grad(losses[i], shared, retain_graph=i < 2)  # (1)!
    per_task_loop.append(torch.cat([g.flatten() for g in grads]))
per_task_loop = torch.stack(per_task_loop)

# Instead: one call; row i of the identity picks task i's loss.
losses = task_losses()
grads = torch.autograd.grad(
    losses, shared, grad_outputs=torch.eye(3), is_grads_batched=True  # (2)!
)
per_task = torch.cat([g.flatten(start_dim=1) for g in grads], dim=1)

assert torch.allclose(per_task, per_task_loop, atol=1e-6)
print("per-task gradients:", tuple(per_task.shape))
print("same as the loop:  ", torch.allclose(per_task, per_task_loop, atol=1e-6))
