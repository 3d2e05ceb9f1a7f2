"""gpudash.track() in your own training loop (docs/track.md), as CI runs it.

python examples/track_loop.py run.csv --seconds 20 &  gpudash replay --follow run.csv   # live
gpudash report run.csv --out report                                                      # afterwards
"""

import argparse
import time

import torch
from torch import nn

import gpudash

parser = argparse.ArgumentParser()
parser.add_argument("csv")
parser.add_argument("--seconds", type=float, default=20.0, help="train this long; the learning rate drops halfway")
args = parser.parse_args()

device = "cuda" if torch.cuda.is_available() else "cpu"
model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
start = time.monotonic()
with gpudash.track(args.csv, label="mlp") as tracker:
    while (elapsed := time.monotonic() - start) < args.seconds:
        x, y = torch.randn(128, 64, device=device), torch.randint(0, 10, (128,), device=device)
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        tracker.step(samples=len(x))
        if elapsed > args.seconds / 2 and optimizer.param_groups[0]["lr"] == 0.1:
            optimizer.param_groups[0]["lr"] = 0.01
            tracker.mark("lr 0.01")
