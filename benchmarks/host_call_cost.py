"""What one more call between two training steps costs a launch-bound loop, with the host's drift
taken out: steps alternated one by one, with and without the call.

    python benchmarks/host_call_cost.py                     # cuda, 120 blocks of 50 pairs per call
    python benchmarks/host_call_cost.py --device cpu --blocks 10

The step is a small MLP's (random inputs made on the device, forward, backward, SGD): about a
millisecond on an H100, launch-bound, so a step's host time is its time (the GPU keeps up). For
each call, steps alternate with and without it (the order flipping each pair), each timed on the
host clock; a block's ratio is its bare steps' time over its steps-with-the-call time, and the
blocks' ratios give a paired interval (``compare_paired``) and a verdict. The calls:

  * A/A: nothing (the method's own bias);
  * a Python call: a method that updates two counters (what ``tracker.step()`` does between stamps);
  * a timing event every 8 steps, ``record()`` asking torch for the current stream each time;
  * the same with the stream looked up once (``record(stream)``);
  * a timing event after every step;
  * ``tracker.step()`` (``gpudash.track()``, its writer thread running).

Prints a table: the time over the bare step with its 95% interval and verdict, and µs a step.
"""

from __future__ import annotations

import argparse
import datetime as dt
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

PAIRS = 50  # pairs of steps per block


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda")
    p.add_argument("--blocks", type=int, default=120, help=f"blocks of {PAIRS} pairs per call (default: 120)")
    args = p.parse_args()

    import torch

    import gpudash

    device = torch.device(args.device)
    cuda = device.type == "cuda"
    train_step = mlp_train_step(torch, device)
    calls = calls_between_steps(torch, cuda)
    tracker = gpudash.track(Path(tempfile.mkdtemp()) / "cost.csv", label="cost", device=args.device)
    calls["tracker.step()"] = lambda: tracker.step(samples=128)
    for _ in range(300):  # warm up: allocator, kernels, the tracker's start
        train_step()
        tracker.step(samples=128)
    if cuda:
        torch.cuda.synchronize()

    name = torch.cuda.get_device_name(device) if cuda else platform.processor() or "cpu"
    print(f"# host call cost: MLP 64-256-10, batch 128, on {device} ({name})")
    print(
        f"# torch {torch.__version__}, CUDA {torch.version.cuda}, python {platform.python_version()}, "
        f"{dt.datetime.now().astimezone().isoformat(timespec='seconds')}"
    )
    print(f"# {args.blocks} blocks of {PAIRS} pairs of steps per call, alternated one by one")
    print_table(train_step, calls, args.blocks)
    tracker.close()
    return 0


def mlp_train_step(torch: Any, device: Any, hidden: int = 256, batch: int = 128) -> Callable[[], None]:
    """A small MLP's training step (64-``hidden``-10, seeded): ``batch`` random inputs made on the
    device, forward, backward, SGD."""
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, hidden), nn.ReLU(), nn.Linear(hidden, 10)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    def train_step() -> None:
        x, y = torch.randn(batch, 64, device=device), torch.randn(batch, 10, device=device)
        loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    return train_step


class Counters:
    """What ``tracker.step()`` does between stamps: two counters updated."""

    def __init__(self) -> None:
        self.steps = self.samples = 0

    def step(self, samples: int) -> None:
        self.steps += 1
        self.samples += samples


def calls_between_steps(torch: Any, cuda: bool) -> dict[str, Callable[[], None]]:
    """The calls to time between two steps, by label (the CUDA events on a GPU only);
    ``tracker.step()`` is added by the caller."""
    counters, calls = Counters(), [0]
    calls_: dict[str, Callable[[], None]] = {"A/A: nothing": lambda: None}
    calls_["a Python call (two counters)"] = lambda: counters.step(128)
    if cuda:
        events = [torch.cuda.Event(enable_timing=True) for _ in range(64)]
        stream = torch.cuda.current_stream()

        def every_8th(with_stream: bool) -> Callable[[], None]:
            def call() -> None:
                calls[0] += 1
                if calls[0] % 8 == 0:
                    ev = events[(calls[0] // 8) % 64]
                    ev.record(stream) if with_stream else ev.record()

            return call

        def every_step() -> None:
            calls[0] += 1
            events[calls[0] % 64].record(stream)

        calls_["a timing event every 8 steps, record()"] = every_8th(False)
        calls_["a timing event every 8 steps, record(stream)"] = every_8th(True)
        calls_["a timing event every step, record(stream)"] = every_step
    return calls_


def print_table(train_step: Callable[[], None], calls: dict[str, Callable[[], None]], blocks: int) -> None:
    """Each call timed by steps alternated with and without it, a table row printed as it is done."""
    from gpudash.stats.comparison import compare_paired
    from gpudash.stats.fmt import fmt_ratio

    print("| call between two steps | bare step, ms | time over the bare step (95% CI) | verdict | µs a step |")
    print("|---|--:|---|---|--:|")
    for label, call in calls.items():
        bare_rates, with_rates, bare_s, with_s = alternate(train_step, call, blocks)
        # the bare rate over the rate with the call: the time with it over the bare time (lower is better)
        c = compare_paired(with_rates, bare_rates, higher_is_better=False)
        steps = blocks * PAIRS
        print(
            f"| {label} | {1000 * bare_s / steps:.3f} | {fmt_ratio(c)} | {c.verdict} | "
            f"{1e6 * (with_s - bare_s) / steps:+.2f} |",
            flush=True,
        )


def alternate(
    train_step: Callable[[], None], call: Callable[[], None], blocks: int, pairs: int = PAIRS
) -> tuple[list[float], list[float], float, float]:
    """Steps alternated one by one, ``call`` after the step in one of each pair (see ``alternate_steps``)."""

    def step_then_call() -> None:
        train_step()
        call()

    return alternate_steps(train_step, step_then_call, blocks, pairs)


def alternate_steps(
    bare: Callable[[], None], other: Callable[[], None], blocks: int, pairs: int = PAIRS
) -> tuple[list[float], list[float], float, float]:
    """Two kinds of step alternated one by one, ``pairs`` pairs a block (the order flipping each
    pair), each timed on the host clock: (each block's ``bare`` steps/s, each block's ``other``
    steps/s, total seconds of each)."""
    clock = time.perf_counter
    bare_rates, other_rates, bare_s, other_s = [], [], 0.0, 0.0
    for b in range(blocks):
        t_bare = t_other = 0.0
        for i in range(pairs):
            first = (b + i) % 2 == 0
            for is_other in (first, not first):
                t = clock()
                if is_other:
                    other()
                    t_other += clock() - t
                else:
                    bare()
                    t_bare += clock() - t
        bare_rates.append(pairs / t_bare)
        other_rates.append(pairs / t_other)
        bare_s, other_s = bare_s + t_bare, other_s + t_other
    return bare_rates, other_rates, bare_s, other_s


if __name__ == "__main__":
    sys.exit(main())
