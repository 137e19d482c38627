import torch

w = torch.ones(3, requires_grad=True)
for _ in range(3):
    loss = (w * w).sum()
    loss.backward()  # 每一步都是一张新图
