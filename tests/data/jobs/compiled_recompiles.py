"""A user's compiled training script (CPU, ``backend="eager"``; ``--backend inductor --device cuda``
on a GPU): its batch length changes every few steps under ``dynamic=False`` (each new length
recompiles the model) and its forward reads a float off a tensor (a graph break). ``--lengths
64,96`` the lengths it cycles through, ``--every N`` steps a length (``--lengths 64:464``: each of 64
to 463, none again for 1,600 steps at ``--every 4``); ``--limit K`` sets dynamo's recompile limit
(then more lengths than K hit it); ``--mode reduce-overhead`` compiles it to run as CUDA graphs."""

import argparse

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=60)
parser.add_argument("--lengths", default="64,96")
parser.add_argument("--every", type=int, default=5)
parser.add_argument("--limit", type=int, default=0)
parser.add_argument("--no-break", action="store_true")
parser.add_argument("--backend", default="eager")  # inductor on a GPU
parser.add_argument("--device", default="cpu")
parser.add_argument("--mode", default=None, help="torch.compile's mode (reduce-overhead: CUDA graphs)")
args = parser.parse_args()
if args.limit:
    torch._dynamo.config.recompile_limit = args.limit

torch.manual_seed(0)


class Scorer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.body(x)
        if not args.no_break:
            spread = out.std().item()  # a float read off a tensor: the graph breaks here
            out = out / (1.0 + spread)
        return out


model = Scorer().to(args.device)
compiled = torch.compile(model, backend=args.backend, dynamic=False, mode=args.mode)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
first, _, stop = args.lengths.partition(":")
lengths = list(range(int(first), int(stop))) if stop else [int(n) for n in args.lengths.split(",")]
total = 0.0
for step in range(args.steps):
    n = lengths[(step // args.every) % len(lengths)]
    x, y = torch.randn(n, 32, device=args.device), torch.randn(n, 1, device=args.device)
    loss = nn.functional.mse_loss(compiled(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    total += float(loss)
print(f"done: {args.steps} steps, mean loss {total / args.steps:.4f}")
