"""Issue 74's window probe (session 20): what a profiler window recording the GPU's activity alone
costs each step of a DDP ResNet-50 (bf16, channels_last, 128 images a rank), without gpudash —
which traced step is slow (the first, CUPTI subscribing again after each teardown, or all of them),
and whether Kineto's external correlation, which gpudash does not need, adds to it.

torchrun --nproc-per-node 2 window_probe.py [--windows 3]
Windows of 5 steps every 60 steps, their kinds interleaved: ``cuda`` (what gpudash's periodic windows
record), ``cuda-nocorr`` (the same, ``disable_external_correlation``) and ``cpu+cuda`` (the host's
operators too). ``TEARDOWN_CUPTI=1`` as gpudash sets it. Prints one JSON line a window on rank 0: each
traced step's ms and the untraced steps' median between the windows.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
from benchmarks.jobs.ddp_resnet_job import join_group, resnet50_ddp, warmed_step  # noqa: E402 - the repository's root first

KINDS = ("cuda", "cuda-nocorr", "cpu+cuda")
GAP = 60  # untraced steps between windows
TRACED = 5


def profiler(kind: str) -> Any:
    """The profiler of a window of that kind (not started)."""
    activities = [ProfilerActivity.CUDA] if kind.startswith("cuda") else [ProfilerActivity.CPU, ProfilerActivity.CUDA]
    if kind == "cuda-nocorr":
        from torch._C._profiler import _ExperimentalConfig

        return profile(
            activities=activities, experimental_config=_ExperimentalConfig(disable_external_correlation=True)
        )
    return profile(activities=activities)


def timed_window(step: Callable[[], None], prof: Any, started: Callable[[], Any] = lambda: None) -> dict[str, Any]:
    """``GAP`` untraced steps, then ``TRACED`` under ``prof`` (``started()`` called once it runs, its
    answer kept): each traced step's ms, the untraced steps' median (after 10), their ratios, and
    the profiler's start and stop."""
    marks = [time.perf_counter()]
    for _ in range(GAP):
        step()
        marks.append(time.perf_counter())
    untraced = [(b - a) * 1e3 for a, b in zip(marks[10:], marks[11:], strict=False)]
    begun = time.perf_counter()
    prof.start()
    answer = started()
    traced = [time.perf_counter()]
    for _ in range(TRACED):
        step()
        traced.append(time.perf_counter())
    prof.stop()
    stopped = time.perf_counter()
    steps_ms = [(b - a) * 1e3 for a, b in zip(traced, traced[1:], strict=False)]
    return {
        "untraced_ms": statistics.median(untraced),
        "traced_ms": [round(v, 2) for v in steps_ms],
        "median_ratio": statistics.median(steps_ms) / statistics.median(untraced),
        "later_ratio": statistics.median(steps_ms[1:]) / statistics.median(untraced),
        "start_ms": (traced[0] - begun) * 1e3,
        "stop_ms": (stopped - traced[-1]) * 1e3,
        "started": answer,
        "torch": torch.__version__,
    }


def probe_setup(kinds: tuple[str, ...]) -> tuple[int, Callable[[], None], list[str]]:
    """A probe's rank, its warmed DDP ResNet-50 step and its windows' kinds in order (``--windows``
    of each, interleaved); ``TEARDOWN_CUPTI=1`` as gpudash sets it."""
    p = argparse.ArgumentParser()
    p.add_argument("--windows", type=int, default=3, help="of each kind")
    args = p.parse_args()
    os.environ.setdefault("TEARDOWN_CUPTI", "1")
    rank, _world, device = join_group()
    ddp, opt = resnet50_ddp(device, bucket_view=True)
    return rank, warmed_step(ddp, opt, device), [kind for _ in range(args.windows) for kind in kinds]


def main() -> None:
    rank, step, plan = probe_setup(KINDS)
    for kind in plan:
        prof = profiler(kind)
        row = {"kind": kind, **timed_window(step, prof)}
        if rank == 0:
            print(json.dumps(row), flush=True)
        del prof
    torch.cuda.synchronize()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
