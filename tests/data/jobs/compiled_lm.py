"""A user's compiled decoder LM whose sequence length changes every few steps, as variable-length
training scripts run: ``--dynamic false`` (each new length recompiles), ``auto`` (torch's automatic
dynamic shapes: the second length makes the graph dynamic), ``--mode reduce-overhead`` (CUDA graphs,
recorded again at each length), ``--in-place`` (``model.compile()`` instead of
``torch.compile(model)``). CPU: ``--backend eager``; a GPU: ``--backend inductor --device cuda``.

Its own figures, on its last line, from its own clock: CUDA events recorded at each step's end on a
GPU (no sync added), the host's clock on the CPU. A step past the first length's that took over twice
its median is one that paid for a new shape. ``JOB steps=N median_ms=X slow_steps=K slow_s=Y lengths=L``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable

import torch
from torch import nn
from torch.nn import functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
from tests.data.jobs.gpt_train import Block  # noqa: E402 - the GPT script's own block: pre-norm attention, MLP


class DecoderLM(nn.Module):
    def __init__(self, vocab: int, width: int, layers: int, heads: int, block: int) -> None:
        super().__init__()
        self.embed, self.position = nn.Embedding(vocab, width), nn.Embedding(block, width)
        self.blocks = nn.ModuleList(Block(width, heads) for _ in range(layers))
        self.norm, self.head = nn.LayerNorm(width), nn.Linear(width, vocab, bias=False)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        x = self.embed(idx) + self.position(torch.arange(idx.shape[1], device=idx.device))
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.norm(x))
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def main() -> None:
    p = argparse.ArgumentParser()
    for name, default in {"steps": 60, "every": 10, "batch": 8, "width": 64, "limit": 0}.items():
        p.add_argument(f"--{name}", type=int, default=default)  # --every: steps at one length; --limit 0: torch's
    p.add_argument("--lengths", default="32,48,64,96", help="the sequence lengths it cycles through")
    p.add_argument("--dynamic", choices=("false", "auto"), default="false")
    p.add_argument("--mode", default=None, help="torch.compile's mode (reduce-overhead: CUDA graphs)")
    p.add_argument("--backend", default="eager")
    p.add_argument("--device", default="cpu")
    p.add_argument("--in-place", action="store_true", help="model.compile() rather than torch.compile(model)")
    p.add_argument("--no-compile", action="store_true", help="run it eager")
    args = p.parse_args()
    if args.limit:
        torch._dynamo.config.recompile_limit = args.limit
    torch.manual_seed(0)
    lengths = [int(n) for n in args.lengths.split(",")]
    device, vocab = torch.device(args.device), 512
    model = DecoderLM(vocab, args.width, 2, 4, max(lengths)).to(device)
    options = {"backend": args.backend, "dynamic": False if args.dynamic == "false" else None, "mode": args.mode}
    step_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    if args.no_compile:
        step_fn = model
    elif args.in_place:
        model.compile(**options)
        step_fn = model
    else:
        step_fn = torch.compile(model, **options)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    on_gpu = device.type == "cuda"
    ends: list[torch.cuda.Event] = []
    clock: list[float] = [time.perf_counter()]
    if on_gpu:
        ends.append(torch.cuda.Event(enable_timing=True))
        ends[-1].record()
    for step in range(args.steps):
        n = lengths[(step // args.every) % len(lengths)]
        idx = torch.randint(0, vocab, (args.batch, n + 1), device=device)
        loss = step_fn(idx[:, :-1], idx[:, 1:])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if on_gpu:
            ends.append(torch.cuda.Event(enable_timing=True))
            ends[-1].record()
        else:
            clock.append(time.perf_counter())
        if step % 50 == 0:
            print(f"step {step} length {n} loss {loss.item():.3f}", flush=True)
    if on_gpu:
        ends[-1].synchronize()
        ms = [a.elapsed_time(b) for a, b in zip(ends, ends[1:], strict=False)]
    else:
        ms = [1e3 * (b - a) for a, b in zip(clock, clock[1:], strict=False)]
    median = statistics.median(ms)
    slow = [t for t in ms[args.every :] if t > 2 * median]  # the first length's steps: its warm-up
    print(
        f"JOB steps={len(ms)} median_ms={median:.4f} slow_steps={len(slow)} slow_s={sum(slow) / 1e3:.4f} "
        f"lengths={len(set(lengths))}",
        flush=True,
    )


if __name__ == "__main__":
    main()
