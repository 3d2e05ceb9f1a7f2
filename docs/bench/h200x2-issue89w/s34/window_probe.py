"""What gpudash's own GPU-only profiler window costs a DDP ResNet-50 step, the window alone: the
job's loop runs ``gpudash_boot.window.ProfilerWindow`` itself (kernels only, as ``record
--trace-every`` asks), 60 untraced steps (the last 45 timed) then a window of 5, ``--windows`` times.
Run bare, the window is all that differs from an untraced step; run under ``gpudash record`` (no
``--trace-every``: gpudash takes no window of its own), gpudash's hooks run in both. Rank 0 prints
a JSON line a window: the untraced step's median, the traced steps, their ratio.

torchrun --standalone --nproc-per-node 2 docs/bench/h200x2-issue89w/s34/window_probe.py --windows 6
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
sys.path[:0] = [ROOT, os.path.join(ROOT, "docs", "bench", "h200x2-issue74h")]
from cupti_probe import timed  # type: ignore[import-not-found]  # noqa: E402 - each step's ms on the host, as that probe timed them


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--windows", type=int, default=6)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--warmup", type=int, default=40)
    args = p.parse_args()
    import torch
    import torch.distributed as dist

    from benchmarks.jobs.ddp_resnet_job import join_group, resnet50_ddp, warmed_step
    from gpudash.boot.gpudash_boot.window import ProfilerWindow

    rank, _world, device = join_group()
    net, opt = resnet50_ddp(device, bucket_view=True)
    step = warmed_step(net, opt, device, batch=args.batch, warmup=args.warmup)
    sent: list[dict[str, Any]] = []
    window = ProfilerWindow(torch, sent.append, contextlib.nullcontext)
    window.cuda, window.rank = device.type == "cuda", rank
    folder = tempfile.mkdtemp(prefix="window-probe-")
    under = "gpudash" if os.environ.get("GPUDASH_JOB_CHANNEL") else "bare"
    rows = []
    for i in range(args.windows):
        untraced = statistics.median(timed(step, 60)[15:])
        sent.clear()
        window.ask({"steps": 5, "dir": folder, "name": f"w{i}", "kernels_only": True})
        window.at_step(0)
        while not sent:
            step()
            window.at_step(0)
        (answer,) = sent
        traced = answer.get("step_ms") or []
        ratio = statistics.median(traced) / untraced if traced else None
        rows.append({"under": under, "window": i, "untraced_ms": round(untraced, 3), "traced_ms": traced})
        rows[-1] |= {"ratio": None if ratio is None else round(ratio, 4), "error": answer.get("error")}
    if device.type == "cuda":
        torch.cuda.synchronize()
    dist.barrier()
    if rank == 0:
        for row in rows:
            print("PROBE " + json.dumps(row), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
