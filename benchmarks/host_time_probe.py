"""Is a pipelined step bound by the host? The host's own cost of enqueueing a step against the
wall time per step, and the CUDA runtime calls that take the host's time. Prints a table.

    python -m benchmarks.host_time_probe [-w encdec] [-v pipelined] [-b 8 -b 16 -b 32] [--steps 300]

``step()`` only enqueues work. In a steady loop the host blocks in a launch once the device's
launch queue is full (a few steps ahead), so the host time of each call equals the wall time
whether the host or the GPU is the bottleneck. The host's own cost is measured right after a
synchronize, while the queue is empty: the time to enqueue 3 steps, divided by 3 (median of 30).
When that cost is close to the wall time per step, the GPU waits for the host: the critical
stream's idle time is launch cost, not the schedule. The third part traces 30 steps and sums the host
time of each CUDA runtime call (cudaLaunchKernel, cudaMalloc, ...) per step.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import os
import statistics
import tempfile
import time

import torch

from gpudash.engine.trace_figures import read_events
from workloads.base import WorkloadOptions
from workloads.knobs import parse_knobs
from workloads.factory import build


def host_and_wall(w, steps: int) -> tuple[float, float, float]:  # noqa: ANN001 - a Workload
    """(host ms to enqueue a step on an empty queue: median, p95; wall ms per step, steady)."""
    for _ in range(30):
        w.step()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(steps):
        w.step()
    torch.cuda.synchronize()
    wall = (time.perf_counter() - start) * 1000 / steps
    host = []
    for _ in range(30):
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(3):
            w.step()
        host.append((time.perf_counter() - t) * 1000 / 3)
    torch.cuda.synchronize()
    host.sort()
    return statistics.median(host), host[int(len(host) * 0.95)], wall


def runtime_calls(w, steps: int = 30) -> list[tuple[str, float, float]]:  # noqa: ANN001
    """(CUDA runtime call, host ms per step, calls per step), largest first."""
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities) as prof:
        for _ in range(steps):
            w.step()
        torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "t.json")
        prof.export_chrome_trace(path)
        events = read_events(path)
    total: dict[str, float] = collections.Counter()
    count: dict[str, int] = collections.Counter()
    for e in events:
        if e.get("cat") == "cuda_runtime":
            total[e["name"]] += e.get("dur", 0) / 1000
            count[e["name"]] += 1
    rows = [(name, ms / steps, count[name] / steps) for name, ms in total.items()]
    return sorted(rows, key=lambda r: -r[1])[:8]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-w", "--workload", default="encdec")
    p.add_argument("-v", "--variant", action="append")
    p.add_argument("-b", "--batch-size", type=int, action="append")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--knob", action="append", default=[])
    args = p.parse_args()
    knobs = parse_knobs(",".join(args.knob)) if args.knob else parse_knobs("none")
    print(f"# host time per step — {torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"{datetime.date.today()}, {args.workload}, knobs {knobs}\n")
    print("| variant | batch | host ms to enqueue a step (median) | (p95) | wall ms/step | host share of wall |")
    print("|---|---:|---:|---:|---:|---:|")
    calls = {}
    for variant in args.variant or ["serial", "pipelined"]:
        for bs in args.batch_size or [8, 16, 32]:
            with build(args.workload, "cuda", WorkloadOptions(variant=variant, batch_size=bs, knobs=knobs)) as w:
                med, p95, wall = host_and_wall(w, args.steps)
                calls[(variant, bs)] = runtime_calls(w)
            print(f"| {variant} | {bs} | {med:.3f} | {p95:.3f} | {wall:.3f} | {100 * med / wall:.0f}% |", flush=True)
    for (variant, bs), rows in calls.items():
        print(f"\n{variant} batch {bs}: CUDA runtime calls, host ms per step (traced)")
        for name, ms, n in rows:
            print(f"  {name:<40} {ms:8.3f} ms  {n:6.1f} calls")


if __name__ == "__main__":
    main()
