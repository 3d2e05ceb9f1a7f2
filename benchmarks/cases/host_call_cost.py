"""What one more call between two training steps costs a launch-bound loop, with the host's drift
taken out: steps alternated one by one, with and without the call.

The step is a small MLP's (``shared.mlp``): about a millisecond on an H100, launch-bound, so a
step's host time is its time. For each call, steps alternate with and without it, blocks of 50
pairs; a block's ratio is its bare steps' time over its steps-with-the-call time, read by pairs.
The calls: nothing (A/A: the method's own bias); a Python call that updates two counters (what
``tracker.step()`` does between stamps); a timing event every 8 steps, ``record()`` asking torch
for the current stream each time, and the same with the stream looked up once; a timing event after
every step; ``tracker.step()`` (``gpudash.track()``, its writer thread running)."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.cases.shared.mlp import MlpParams, mlp_train_step, torch_device
from benchmarks.harness.context import Run
from benchmarks.harness.params import param
from benchmarks.harness.schedule import alternate_steps
from benchmarks.harness.stats import ratio, ratio_text

PAIRS = 50  # pairs of steps per block


@dataclass(frozen=True)
class Params(MlpParams):
    blocks: int = param(120, f"blocks of {PAIRS} pairs of steps per call")


class Counters:
    """What ``tracker.step()`` does between stamps: two counters updated."""

    def __init__(self) -> None:
        self.steps = self.samples = 0

    def step(self, samples: int) -> None:
        self.steps += 1
        self.samples += samples


def calls_between_steps(torch: Any, cuda: bool, batch: int) -> dict[str, Callable[[], None]]:
    """The calls to time between two steps of ``batch`` samples, by label (the CUDA events on a
    GPU only); ``tracker.step()`` is added by the caller."""
    counters, calls = Counters(), [0]
    out: dict[str, Callable[[], None]] = {"A/A: nothing": lambda: None}
    out["a Python call (two counters)"] = lambda: counters.step(batch)
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

        out["a timing event every 8 steps, record()"] = every_8th(False)
        out["a timing event every 8 steps, record(stream)"] = every_8th(True)
        out["a timing event every step, record(stream)"] = every_step
    return out


def measure(run: Run, p: Params) -> None:
    import torch

    import gpudash

    device = torch_device(torch, p.device)
    train_step = mlp_train_step(torch, device, p.hidden, p.batch)
    calls = calls_between_steps(torch, device.type == "cuda", p.batch)
    tracker = gpudash.track(Path(tempfile.mkdtemp()) / "cost.csv", label="cost", device=p.device)
    calls["tracker.step()"] = lambda: tracker.step(samples=p.batch)
    for _ in range(300):  # warm up: allocator, kernels, the tracker's start
        train_step()
        tracker.step(samples=p.batch)
    if device.type == "cuda":
        torch.cuda.synchronize()
    run.comment(f"host call cost: MLP 64-{p.hidden}-10, batch {p.batch}, on {device}")
    run.comment(f"{p.blocks} blocks of {PAIRS} pairs of steps per call, alternated one by one")
    table = run.table(
        ["call between two steps", "bare step, ms", "time over the bare step (95% CI)", "verdict", "µs a step"],
        ["---", "--:", "---", "---", "--:"],
    )
    steps = p.blocks * PAIRS
    for label, call in calls.items():

        def step_then_call(call: Callable[[], None] = call) -> None:
            train_step()
            call()

        got = alternate_steps(train_step, step_then_call, p.blocks, PAIRS)
        # the bare rate over the rate with the call: the time with it over the bare time (lower is better)
        f = run.keep(label, ratio(label, got.other_rates, got.bare_rates, higher_is_better=False))
        run.values(f"{label}: with it", got.other_rates, "steps/s")
        run.values(f"{label}: bare", got.bare_rates, "steps/s")
        cost_us = 1e6 * (got.other_s - got.bare_s) / steps
        run.row(table, label, f"{1000 * got.bare_s / steps:.3f}", ratio_text(f), f.verdict, f"{cost_us:+.2f}")
    tracker.close()
