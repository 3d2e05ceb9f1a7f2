"""What a GPU-only periodic window costs a DDP ResNet-50 step on a torch without per-kind selection
(before 2.12), with the CUDA calls' records turned off in torch's own CUPTI (``off``: gpudash as it
is) against those records kept (``calls``: gpudash until this session). gpudash's own window
(``gpudash_job_window.ProfilerWindow``, kernels only) in one process, the arms alternated window by
window: 60 untraced steps (the last 45 timed), then a window of 5. Rank 0 prints a JSON line a window:
its arm, the untraced step's median, the traced steps, their ratio, and its trace's kernels and CUDA
calls (counted after the last window, off the steps).

torchrun --standalone --nproc-per-node 2 docs/bench/h200x2-issue74i/window_cost.py --windows 8
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import statistics
import sys
import tempfile
from collections.abc import Callable
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path[:0] = [
    ROOT,
    os.path.join(ROOT, "gpudash", "job", "boot"),
    os.path.join(ROOT, "docs", "bench", "h200x2-issue74h"),
]
from cupti_probe import timed  # type: ignore[import-not-found]  # noqa: E402 - each step's ms, as that probe timed them

ARMS = ("calls", "off")


def one_window(window: Any, sent: list[dict[str, Any]], step: Callable[[], None], name: str, folder: str) -> None:
    """A window of 5 steps, as the job's hooks run one at its step boundaries."""
    sent.clear()
    window.ask({"steps": 5, "dir": folder, "name": name, "kernels_only": True})
    window.at_step(0)
    while not sent:
        step()
        window.at_step(0)


def counted(path: str) -> dict[str, int]:
    """A trace's kernels and CUDA calls."""
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    cats = collections.Counter(str(e.get("cat")) for e in events)
    return {"kernels": cats["kernel"], "runtime": cats["cuda_runtime"], "driver": cats["cuda_driver"]}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--windows", type=int, default=8)
    args = p.parse_args()
    import gpudash_job_window  # type: ignore[import-not-found]
    import torch
    import torch.distributed as dist

    from benchmarks.jobs.ddp_resnet_job import join_group, resnet50_ddp, warmed_step

    real = gpudash_job_window.calls_unrecorded
    rank, _world, device = join_group()
    net, opt = resnet50_ddp(device, bucket_view=True)
    step = warmed_step(net, opt, device)
    sent: list[dict[str, Any]] = []
    window = gpudash_job_window.ProfilerWindow(torch, sent.append, contextlib.nullcontext)
    window.cuda, window.rank = True, rank
    folder = tempfile.mkdtemp(prefix="window-cost-")
    rows = []
    for i in range(args.windows):
        arm = ARMS[i % 2]
        gpudash_job_window.calls_unrecorded = (lambda: "kept by the probe") if arm == "calls" else real
        untraced = statistics.median(timed(step, 60)[15:])
        one_window(window, sent, step, f"w{i}", folder)
        (answer,) = sent
        traced = answer["step_ms"]
        ratio = statistics.median(traced) / untraced
        rows.append({"arm": arm, "window": i, "untraced_ms": round(untraced, 3), "traced_ms": traced})
        rows[-1] |= {"ratio": round(ratio, 4), "calls_why": answer.get("calls_why"), "path": answer["path"]}
        rows[-1] |= {"error": answer.get("error"), "torch": torch.__version__}
    torch.cuda.synchronize()
    dist.barrier()
    if rank == 0:
        for row in rows:
            print(json.dumps(row | (counted(row["path"]) if not row["error"] else {})), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
