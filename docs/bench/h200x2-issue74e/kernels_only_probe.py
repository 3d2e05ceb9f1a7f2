"""Issue 74's kernels-only probe (session 21): does a profiler window that keeps CUPTI's kernel,
memcpy and memset records but not its runtime- and driver-API records (one or two a launch) cost a
DDP ResNet-50 step (bf16, channels_last, 128 images a rank) less than the GPU-only window gpudash
records now? Without gpudash.

torchrun --nproc-per-node 2 kernels_only_probe.py [--windows 3]
Windows of 5 steps every 60 steps, their kinds interleaved: ``cuda`` (gpudash's periodic window:
``ProfilerActivity.CUDA`` alone), ``kernels`` (the same, then CUPTI's RUNTIME and DRIVER activity
kinds disabled through the process's own libcupti right after the profiler starts — torch 2.11 has
no per-kind selection; from 2.12 ``activities=[{ProfilerActivity.CUDA: [...]}]`` says it),
``kernels-nocorr`` (that, with ``disable_external_correlation``). ``TEARDOWN_CUPTI=1`` as gpudash
sets it. One JSON line a window on rank 0: each traced step's ms, the untraced steps' median between
the windows, and the exported trace's events by category (what such a window still gives).
"""

from __future__ import annotations

import collections
import ctypes
import json
import os
import sys
from typing import Any

import torch
import torch.distributed as dist
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "h200x4-issue74d"))
from window_probe import probe_setup, timed_window  # type: ignore[import-not-found,unused-ignore]  # noqa: E402 - its folder first

KINDS = ("cuda", "kernels", "kernels-nocorr")
CUPTI_DRIVER, CUPTI_RUNTIME = 4, 5  # CUpti_ActivityKind (cupti_activity.h)


def libcupti() -> Any:
    """The CUPTI library this process loaded (Kineto's), by its path in /proc/self/maps."""
    with open("/proc/self/maps") as maps:
        paths = {line.split()[-1] for line in maps if "libcupti" in line}
    if not paths:
        raise RuntimeError("no libcupti loaded")
    return ctypes.CDLL(sorted(paths)[0])


def disable_api_records() -> list[int]:
    """CUPTI's RUNTIME and DRIVER activity kinds disabled (the window started: Kineto enabled them);
    each call's result."""
    cupti = libcupti()
    return [cupti.cuptiActivityDisable(CUPTI_RUNTIME), cupti.cuptiActivityDisable(CUPTI_DRIVER)]


def profiler(kind: str) -> Any:
    """The profiler of a window of that kind (not started)."""
    if kind == "kernels-nocorr":
        from torch._C._profiler import _ExperimentalConfig

        config = _ExperimentalConfig(disable_external_correlation=True)
        return profile(activities=[ProfilerActivity.CUDA], experimental_config=config)
    return profile(activities=[ProfilerActivity.CUDA])


def categories(prof: Any, rank: int, kind: str) -> dict[str, int]:
    """The exported trace's events by category."""
    path = f"/tmp/kernels-probe-{kind}-{rank}.json"
    prof.export_chrome_trace(path)
    with open(path) as f:
        events = json.load(f).get("traceEvents", [])
    return dict(collections.Counter(str(e.get("cat")) for e in events))


def main() -> None:
    rank, step, plan = probe_setup(KINDS)
    for kind in plan:
        prof = profiler(kind)
        row = {"kind": kind, **timed_window(step, prof, disable_api_records if kind.startswith("kernels") else list)}
        row["cupti_disable_results"] = row.pop("started")  # CUPTI_SUCCESS is 0
        if rank == 0:
            row["categories"] = categories(prof, rank, kind)
            print(json.dumps(row), flush=True)
        del prof
        dist.barrier()
    torch.cuda.synchronize()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
