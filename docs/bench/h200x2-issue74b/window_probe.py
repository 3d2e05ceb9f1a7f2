"""Issue 74's window probe (session 18): on a DDP ResNet-50 step of 2 GPUs, what a profiler window
costs by how it is taken — ``torch.profiler.profile`` recording the GPU alone (gpudash's periodic
window), the same through the autograd profiler's low-level calls (no Python parse), with external
correlation off, CPU and GPU — and whether the steps after it run as before it. Each variant: the
start, each traced step, the stop, the trace's writing (on the training thread, or on another
thread while training goes on), then the untraced steps after.

torchrun --nproc-per-node 2 window_probe.py --out DIR
Prints one JSON line a rank.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from typing import Any

import torch
import torch.distributed as dist
from torch.autograd.profiler import record_function

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
from benchmarks.jobs.ddp_resnet_job import join_group, resnet50_ddp  # noqa: E402 - the repository's root first


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", default="/tmp/probe")
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--window", type=int, default=10)
    p.add_argument("--variants", default="", help="comma-separated: only these (call 4: profile_cuda,profile_cuda_again)")
    args = p.parse_args()
    rank, world, device = join_group()
    ddp, opt = resnet50_ddp(device, bucket_view=True)
    x = torch.randn(args.batch, 3, 224, 224, device=device).to(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (args.batch,), device=device)

    def step() -> None:
        with record_function("gpudash.step"):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = torch.nn.functional.cross_entropy(ddp(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()

    def steps(n: int) -> list[float]:
        marks = [time.perf_counter()]
        for _ in range(n):
            step()
            marks.append(time.perf_counter())
        return [(b - a) * 1e3 for a, b in zip(marks, marks[1:])]

    def settle() -> None:
        torch.cuda.synchronize()
        dist.barrier()

    steps(30)
    settle()
    out: dict[str, Any] = {"rank": rank, "world": world, "torch": torch.__version__,
                           "gpu": torch.cuda.get_device_name(device), "TEARDOWN_CUPTI": os.environ.get("TEARDOWN_CUPTI")}
    out["untraced_ms"] = statistics.median(steps(40))
    os.makedirs(args.out, exist_ok=True)

    from torch.autograd import ProfilerConfig, ProfilerState, _disable_profiler, _enable_profiler, _prepare_profiler
    from torch.profiler import ProfilerActivity, profile
    from torch._C._profiler import _ExperimentalConfig

    def low_level(acts: set[Any], exp: Any) -> tuple[Any, Any]:
        cfg = ProfilerConfig(ProfilerState.KINETO, False, False, False, False, False, exp)
        _prepare_profiler(cfg, acts)
        return cfg, acts

    variants = ["profile_cuda", "low_cuda", "low_cuda_noext", "low_cuda_thread_save", "profile_cuda_again", "profile_cpu_cuda"]
    if args.variants:
        variants = [v for v in variants if v in args.variants.split(",")]
    for name in variants:
        settle()
        before = statistics.median(steps(20))
        t0 = time.perf_counter()
        prof = None
        if name.startswith("profile"):
            acts = [ProfilerActivity.CUDA] if "cpu" not in name else [ProfilerActivity.CPU, ProfilerActivity.CUDA]
            prof = profile(activities=acts)
            prof.start()
        else:
            exp = _ExperimentalConfig(disable_external_correlation=True) if "noext" in name else _ExperimentalConfig()
            cfg, acts2 = low_level({ProfilerActivity.CUDA}, exp)
            _enable_profiler(cfg, acts2)
        t1 = time.perf_counter()
        traced = steps(args.window)
        t2 = time.perf_counter()
        path = os.path.join(args.out, f"{name}-rank{rank}.json")
        during_save: list[float] = []
        if prof is not None:
            prof.stop()
            t3 = time.perf_counter()
            prof.export_chrome_trace(path)
        else:
            result = _disable_profiler()
            t3 = time.perf_counter()
            if "thread" in name:
                th = threading.Thread(target=result.save, args=(path,))
                th.start()
                while th.is_alive():
                    during_save += steps(1)
                th.join()
            else:
                result.save(path)
        t4 = time.perf_counter()
        after = steps(40)
        out[name] = {
            "before_ms": round(before, 2),
            "start_ms": round((t1 - t0) * 1e3, 1),
            "first_ms": round(traced[0], 2),
            "traced_median_ms": round(statistics.median(traced[1:]), 2),
            "traced_mean_ms": round(statistics.mean(traced), 2),
            "window_ms": round((t2 - t1) * 1e3, 1),
            "stop_ms": round((t3 - t2) * 1e3, 1),
            "export_ms": round((t4 - t3) * 1e3, 1),
            "steps_during_save": len(during_save),
            "during_save_median_ms": round(statistics.median(during_save), 2) if during_save else None,
            "after_first10_ms": round(statistics.median(after[:10]), 2),
            "after_last30_ms": round(statistics.median(after[10:]), 2),
            "trace_mb": round(os.path.getsize(path) / 2**20, 1) if os.path.exists(path) else None,
        }
    print(json.dumps(out), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
