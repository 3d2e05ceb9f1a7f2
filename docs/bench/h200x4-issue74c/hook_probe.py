"""Issue 74's hook probe (session 19): what gpudash's way of timing DDP's all-reduce costs a DDP
ResNet-50 step by itself, without gpudash — DDP's built-in C++ all-reduce against DDP's reference
Python hook (``default_hooks.allreduce_hook``, which gpudash registers to time the buckets), and
each with NCCL's own timing on (``TORCH_NCCL_ENABLE_TIMING=1``, which gpudash sets). Under gpudash
the untraced step ran 4% slower than bare in the point estimate (call 2).

torchrun --nproc-per-node 2 hook_probe.py [--python-hook]   (TORCH_NCCL_ENABLE_TIMING from the environment)
Prints one JSON line a rank: the median and mean step of 200 after 40 of warm-up.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
from benchmarks.jobs.ddp_resnet_job import join_group, resnet50_ddp, step_times_ms, warmed_step  # noqa: E402 - the repository's root first


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--python-hook", action="store_true")
    p.add_argument("--steps", type=int, default=200)
    args = p.parse_args()
    rank, world, device = join_group()
    ddp, opt = resnet50_ddp(device, bucket_view=True)
    if args.python_hook:
        ddp.register_comm_hook(None, default_hooks.allreduce_hook)
    took = step_times_ms(warmed_step(ddp, opt, device), args.steps)
    variant = ("python-hook" if args.python_hook else "builtin") + (
        "+nccl-timing" if os.environ.get("TORCH_NCCL_ENABLE_TIMING") == "1" else ""
    )
    print(
        json.dumps(
            {
                "rank": rank,
                "world": world,
                "variant": variant,
                "median_ms": statistics.median(took),
                "mean_ms": statistics.fmean(took),
                "torch": torch.__version__,
            }
        ),
        flush=True,
    )
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
