"""Issue 74's cost probe (session 20): under gpudash a DDP ResNet-50 step (bf16, channels_last, 128
images a rank) ran 5% slower than bare with NCCL's own timing gone (calls 2 and 3). Which of
gpudash's per-step work costs it, without gpudash: DDP's built-in all-reduce, DDP's reference Python
hook (which gpudash registers), that hook with the all-reduce timed as gpudash times it (an event at
the call; the end an event recorded by a second callback on the work's future), the same timing in
the hook's one callback, and CUDA's sync debug mode on (gpudash counts syncs by line with it).

torchrun --nproc-per-node 2 comm_cost_probe.py --variant builtin|hook|hook-timed|hook-one-then|hook-arrival|sync-debug
Prints one JSON line a rank: the median step of 200 after 40 of warm-up.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import warnings
from collections import deque
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
from benchmarks.jobs.ddp_resnet_job import join_group, resnet50_ddp, step_times_ms, warmed_step  # noqa: E402 - the repository's root first

VARIANTS = ("builtin", "hook", "hook-timed", "hook-one-then", "hook-arrival", "sync-debug")
ENDS: deque[tuple[Any, Any]] = deque(maxlen=64)  # the timed variants' (arrival, end) events, kept a while


def timed_all_reduce(original: Any) -> Any:
    """``dist.all_reduce`` as gpudash wraps it: an event at the call; an async call's end an event
    its future's callback records."""

    def all_reduce(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        arrival = torch.cuda.Event(enable_timing=True)
        arrival.record(torch.cuda.current_stream(tensor.device))
        work = original(tensor, *args, **kwargs)
        pair: list[Any] = [arrival, None]

        def ended(_future: Any) -> None:
            end = torch.cuda.Event(enable_timing=True)
            end.record(torch.cuda.current_stream(tensor.device))
            pair[1] = end

        work.get_future().then(ended)
        ENDS.append((pair[0], pair[1]))
        return work

    return all_reduce


def arrival_only(original: Any) -> Any:
    """``dist.all_reduce`` with an event at the call alone: what an event costs without a callback."""

    def all_reduce(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        arrival = torch.cuda.Event(enable_timing=True)
        arrival.record(torch.cuda.current_stream(tensor.device))
        ENDS.append((arrival, None))
        return original(tensor, *args, **kwargs)

    return all_reduce


def one_then_hook(process_group, bucket):  # unannotated: DDP refuses any annotation but its own
    """DDP's reference hook with the timing in its own callback: one callback a bucket."""
    group = process_group if process_group is not None else dist.group.WORLD
    assert group is not None
    tensor = bucket.buffer()
    tensor.div_(group.size())
    arrival = torch.cuda.Event(enable_timing=True)
    arrival.record(torch.cuda.current_stream(tensor.device))
    work = dist.all_reduce(tensor, group=group, async_op=True)
    assert work is not None

    def ended(future: Any) -> Any:
        end = torch.cuda.Event(enable_timing=True)
        end.record(torch.cuda.current_stream(tensor.device))
        ENDS.append((arrival, end))
        return future.value()[0]

    return work.get_future().then(ended)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--variant", choices=VARIANTS, default="builtin")
    p.add_argument("--steps", type=int, default=200)
    args = p.parse_args()
    rank, world, device = join_group()
    ddp, opt = resnet50_ddp(device, bucket_view=True)
    if args.variant in ("hook", "hook-timed", "hook-arrival"):
        ddp.register_comm_hook(None, default_hooks.allreduce_hook)
    if args.variant == "hook-timed":
        dist.all_reduce = timed_all_reduce(dist.all_reduce)
    if args.variant == "hook-arrival":
        dist.all_reduce = arrival_only(dist.all_reduce)
    if args.variant == "hook-one-then":
        ddp.register_comm_hook(None, one_then_hook)
    if args.variant == "sync-debug":
        warnings.simplefilter("ignore")
        torch.cuda.set_sync_debug_mode(1)
    took = step_times_ms(warmed_step(ddp, opt, device), args.steps)
    row = {"rank": rank, "world": world, "variant": args.variant, "median_ms": statistics.median(took)}
    print(json.dumps({**row, "mean_ms": statistics.fmean(took), "torch": torch.__version__}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
