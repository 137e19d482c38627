# --8<-- [start:lesson]
import torch
from torch import nn

torch.manual_seed(0)
critic = nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 1))
real, fake = torch.randn(8, 2), torch.randn(8, 2) + 2.0
alpha = torch.rand(8, 1)

mixed = (alpha * real + (1 - alpha) * fake).requires_grad_()  # (1)!
(grad_mixed,) = torch.autograd.grad(critic(mixed).sum(), mixed, create_graph=True)  # (2)!
penalty = ((grad_mixed.norm(dim=1) - 1) ** 2).mean()
loss = critic(fake).mean() - critic(real).mean() + 10 * penalty
loss.backward()  # (3)!
print(f"penalty: {penalty.item():.4g}")
print(f"critic[0].weight.grad_norm: {critic[0].weight.grad.norm().item():.4g}")
# --8<-- [end:lesson]

# --8<-- [start:proof]
from torch.func import functional_call, grad, vmap

params = dict(critic.named_parameters())
points = mixed.detach()


def critic_loss(p):
    def score(point):
        return functional_call(critic, p, (point,)).squeeze()

    g = vmap(grad(score))(points)  # (1)!
    gp = ((g.norm(dim=1) - 1) ** 2).mean()
    on_fake = functional_call(critic, p, (fake,)).mean()
    on_real = functional_call(critic, p, (real,)).mean()
    return on_fake - on_real + 10 * gp


expected = grad(critic_loss)(params)
for name, p in critic.named_parameters():
    assert torch.allclose(p.grad, expected[name], atol=1e-6), name  # (2)!

mixed = points.clone().requires_grad_()
(grad_mixed,) = torch.autograd.grad(
    critic(mixed).sum(),
    mixed,
    create_graph=True,
    retain_graph=False,  # (3)!
)
penalty = ((grad_mixed.norm(dim=1) - 1) ** 2).mean()
try:
    (critic(fake).mean() - critic(real).mean() + 10 * penalty).backward()
except RuntimeError as error:
    message = str(error)
else:
    raise AssertionError("the critic's graph should have been freed")
assert message.startswith("Trying to backward through the graph a second time")
# --8<-- [end:proof]
