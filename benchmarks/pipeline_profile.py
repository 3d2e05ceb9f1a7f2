"""Why a two-stage pipeline stops short of its overlap bound: a profiler trace of the pipelined
steps, read per CUDA stream. Prints a table.

    python -m benchmarks.pipeline_profile [-w encdec] [-b 16] [--steps 60] [--knob ...]

The overlap bound 1/max(t1, t2) takes each stage's time *alone*. In the pipeline the two stages'
kernels share the SMs, so each can run slower than alone; and the critical stream can wait
(idle) between its kernels. From the trace: for each stream, the union of its kernels' intervals
(busy), the time both streams run at once (overlap), and the critical stream's idle time, per
step; against each stage timed alone (``Workload.time_stages``, CUDA events).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import torch

from gpudash.engine.trace_figures import Interval, covered_by_two_or_more, kernels_by_stream, length, read_events
from workloads import streams as streams_module
from workloads.base import WorkloadOptions
from workloads.knobs import parse_knobs
from workloads.factory import build

def intersection(x: list[Interval], y: list[Interval]) -> float:
    """Total length where two merged interval lists overlap."""
    return covered_by_two_or_more([x, y])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("-w", "--workload", default="encdec")
    p.add_argument("-v", "--variant", default="pipelined")
    p.add_argument("-b", "--batch-size", type=int, default=16)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--knob", action="append", default=[])
    p.add_argument("--depth", type=int, default=None, help="items produced ahead (workloads.streams.PREFETCH_DEPTH)")
    args = p.parse_args()
    knobs = parse_knobs(",".join(args.knob)) if args.knob else parse_knobs("none")
    if args.depth is not None:
        streams_module.PREFETCH_DEPTH = args.depth
    opts = WorkloadOptions(variant=args.variant, batch_size=args.batch_size, knobs=knobs)
    with build(args.workload, "cuda", opts) as w:
        alone = w.time_stages(50)
        (n1, t1), (n2, t2) = alone.items()
        for _ in range(30):
            w.step()
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(args.steps):
            w.step()
        torch.cuda.synchronize()
        untraced_ms = (time.perf_counter() - start) * 1000 / args.steps
        activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        with torch.profiler.profile(activities=activities) as prof:
            for _ in range(args.steps):
                w.step()
            torch.cuda.synchronize()
        path = os.path.join(tempfile.mkdtemp(), "trace.json")
        prof.export_chrome_trace(path)
    streams = kernels_by_stream(read_events(path))
    ranked = sorted(streams, key=lambda s: length(streams[s]), reverse=True)
    span = max(b for iv in streams.values() for _, b in iv) - min(a for iv in streams.values() for a, _ in iv)
    per = 1.0 / (1000.0 * args.steps)  # µs in the whole trace → ms per step
    print(f"# {torch.cuda.get_device_name()} · torch {torch.__version__} · {time.strftime('%Y-%m-%d')} · "
          f"{args.workload}/{args.variant} batch {args.batch_size} · knobs {knobs.text()} · "
          f"depth {streams_module.PREFETCH_DEPTH}")
    print(f"stages alone (CUDA events): {n1} {t1:.3f} ms, {n2} {t2:.3f} ms → overlap bound "
          f"{1000 / max(t1, t2):.1f} steps/s; untraced run {1000 / untraced_ms:.1f} steps/s "
          f"({100 * (1000 / untraced_ms) / (1000 / max(t1, t2)):.1f}% of the bound)")
    print("| stream | kernel busy ms/step | busy % of the traced span | runs while the other runs, ms/step |")
    print("|---|---:|---:|---:|")
    top = ranked[:2]
    for sid in top:
        other = [s for s in top if s != sid]
        both = intersection(streams[sid], streams[other[0]]) if other else 0.0
        print(f"| {sid} | {length(streams[sid]) * per:.3f} | {100 * length(streams[sid]) / span:.1f} | "
              f"{both * per:.3f} |")
    if len(top) == 2:
        critical = top[0]
        busy = length(streams[critical]) * per
        idle = span * per - busy
        slower = max(t1, t2)
        print(f"traced step {span * per:.3f} ms = critical stream busy {busy:.3f} ms "
              f"(alone: {slower:.3f} ms, {100 * (busy / slower - 1):+.1f}% while sharing the GPU) "
              f"+ idle {idle:.3f} ms")


if __name__ == "__main__":
    main()
