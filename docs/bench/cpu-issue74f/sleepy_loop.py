"""A user's CPU training loop whose step sleeps 10 ms (a read, a log, a sleep) beside a small MLP."""

import time

import torch
from torch import nn

model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for _ in range(4000):
    x, y = torch.randn(64, 256), torch.randint(0, 10, (64,))
    time.sleep(0.01)
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
