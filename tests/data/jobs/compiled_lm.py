"""A user's compiled decoder LM whose sequence length changes every few steps, as variable-length
training scripts run: ``--dynamic false`` (each new length recompiles), ``auto`` (torch's automatic
dynamic shapes: the second length makes the graph dynamic), ``--mode reduce-overhead`` (CUDA graphs,
recorded again at each length), ``--in-place`` (``model.compile()`` instead of
``torch.compile(model)``), ``--blocks`` (each block compiled in place, the rest eager). CPU:
``--backend eager``; a GPU: ``--backend inductor --device cuda``.

Its own figures, on its last line, from its own clock: CUDA events recorded at each step's end on a
GPU (no sync added), the host's clock on the CPU. A step past the first length's that took over twice
its median is slow; those among the first two steps at a length not run before paid for it (a
compile, then CUDA graphs recorded); a slow step at a length run before is another slow step:
``JOB steps=N median_ms=X slow_steps=K slow_s=Y shape_steps=K2 shape_s=Y2 lengths=L
slow_at=STEP:MS,…`` (the first 60 slow steps, counted from 1, with their times). The model is the
GPT script's (``gpt_train.py``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
from tests.data.jobs.gpt_train import GPT  # noqa: E402 - the GPT script's own model: pre-norm blocks, tied head

StepFn = Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor | None]]


def parse() -> argparse.Namespace:
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
    p.add_argument("--blocks", action="store_true", help="compile each block in place, the rest eager")
    return p.parse_args()


def compiled(model: GPT, args: argparse.Namespace) -> StepFn:
    """What the training loop calls: the model compiled as ``args`` say."""
    options = {"backend": args.backend, "dynamic": False if args.dynamic == "false" else None, "mode": args.mode}
    if args.no_compile:
        return model
    if args.blocks:
        for block in model.blocks:
            block.compile(**options)
        return model
    if args.in_place:
        model.compile(**options)
        return model
    return torch.compile(model, **options)


def report(ms: list[float], every: int, lengths_at: Callable[[int], int]) -> None:
    """The job's own figures from its steps' times (``ms``), on its last line."""
    median = statistics.median(ms)
    slow = [i for i in range(every, len(ms)) if ms[i] > 2 * median]  # the first length's: its warm-up
    firsts = {lengths_at(i): i for i in reversed(range(len(ms)))}  # each length's first step
    new = {i for i in firsts.values() if i >= every}  # (the first length's: warm-up)
    paid = [i for i in slow if i in new or i - 1 in new]  # a new length's first two steps (then CUDA graphs)
    print(
        f"JOB steps={len(ms)} median_ms={median:.4f} slow_steps={len(slow)} "
        f"slow_s={sum(ms[i] for i in slow) / 1e3:.4f} shape_steps={len(paid)} "
        f"shape_s={sum(ms[i] for i in paid) / 1e3:.4f} lengths={len(firsts)} "
        f"slow_at={','.join(f'{i + 1}:{ms[i]:.1f}' for i in slow[:60])}",  # step (from 1): its ms
        flush=True,
    )


def main() -> None:
    args = parse()
    if args.limit:
        torch._dynamo.config.recompile_limit = args.limit
    torch.manual_seed(0)
    lengths = [int(n) for n in args.lengths.split(",")]
    device, vocab = torch.device(args.device), 512
    model = GPT(argparse.Namespace(vocab=vocab, embd=args.width, block=max(lengths), heads=4, layers=2)).to(device)
    step_fn = compiled(model, args)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    on_gpu = device.type == "cuda"
    ends: list[torch.cuda.Event] = []
    clock: list[float] = [time.perf_counter()]
    if on_gpu:
        ends.append(torch.cuda.Event(enable_timing=True))
        ends[-1].record()

    def lengths_at(step: int) -> int:
        return lengths[(step // args.every) % len(lengths)]

    for step in range(args.steps):
        idx = torch.randint(0, vocab, (args.batch, lengths_at(step) + 1), device=device)
        _, loss = step_fn(idx[:, :-1].contiguous(), idx[:, 1:].contiguous())  # as the GPT script's batches
        assert loss is not None
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if on_gpu:
            ends.append(torch.cuda.Event(enable_timing=True))
            ends[-1].record()
        else:
            clock.append(time.perf_counter())
        if step % 50 == 0:
            print(f"step {step} length {lengths_at(step)} loss {loss.item():.3f}", flush=True)
    if on_gpu:
        ends[-1].synchronize()
        report([a.elapsed_time(b) for a, b in zip(ends, ends[1:], strict=False)], args.every, lengths_at)
    else:
        report([1e3 * (b - a) for a, b in zip(clock, clock[1:], strict=False)], args.every, lengths_at)


if __name__ == "__main__":
    main()
