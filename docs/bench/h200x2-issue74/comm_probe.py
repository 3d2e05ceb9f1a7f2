"""Issue 74's probe (kept beside its output as it ran, but for its setup): on a DDP ResNet-50 job
of 2 GPUs, what a profiler window costs a step by what it records, what the NCCL kernels in a trace
carry (for matching a collective across ranks), and the gradients' all-reduce timed apart after a
barrier. Its process group and its DDP model come from ``benchmarks/jobs/ddp_resnet_job.py`` (the
copy of those lines it ran with made the same: NCCL, ``gradient_as_bucket_view=True``, 25 MB buckets).

torchrun --nproc-per-node 2 comm_probe.py --out DIR [--wait-rank R --wait-ms 25]
Prints one JSON line a rank: untraced / traced ms a step by the window's activities, the
all-reduce's time apart, and the NCCL kernels' args; writes each window's trace to DIR.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
from torch.profiler import ProfilerActivity, profile, record_function

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
from benchmarks.jobs.ddp_resnet_job import join_group, resnet50_ddp  # noqa: E402 - the repository's root first


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", default="/tmp/probe")
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--wait-rank", type=int, default=-1)
    p.add_argument("--wait-ms", type=float, default=0.0)
    p.add_argument("--steps", type=int, default=40)
    args = p.parse_args()
    rank, world, device = join_group()
    ddp, opt = resnet50_ddp(device, bucket_view=True)
    x = torch.randn(args.batch, 3, 224, 224, device=device).to(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (args.batch,), device=device)
    wait_s = args.wait_ms / 1e3 if rank == args.wait_rank else 0.0

    def step() -> None:
        if wait_s:
            time.sleep(wait_s)
        with record_function("gpudash.step"):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = torch.nn.functional.cross_entropy(ddp(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

    def timed(n: int) -> list[float]:
        torch.cuda.synchronize()
        dist.barrier()
        marks = [time.perf_counter()]
        for _ in range(n):
            step()
            marks.append(time.perf_counter())
        torch.cuda.synchronize()
        marks[-1] = time.perf_counter()
        return [(b - a) * 1e3 for a, b in zip(marks, marks[1:])]

    timed(20)  # warm-up
    out: dict[str, object] = {"rank": rank, "world": world, "torch": torch.__version__,
                              "gpu": torch.cuda.get_device_name(device)}
    out["untraced_ms"] = statistics.median(timed(args.steps))
    windows = {
        "cpu_cuda": [ProfilerActivity.CPU, ProfilerActivity.CUDA],
        "cuda": [ProfilerActivity.CUDA],
        "cpu": [ProfilerActivity.CPU],
    }
    os.makedirs(args.out, exist_ok=True)
    for name, acts in windows.items():
        prof = profile(activities=acts)
        prof.start()
        ms = timed(10)
        t0 = time.perf_counter()
        prof.stop()
        stop_s = time.perf_counter() - t0
        path = os.path.join(args.out, f"{name}-rank{rank}.json")
        t0 = time.perf_counter()
        prof.export_chrome_trace(path)
        export_s = time.perf_counter() - t0
        with open(path) as f:
            trace = json.load(f)
        events = trace.get("traceEvents", [])
        cats: dict[str, int] = {}
        for e in events:
            cats[str(e.get("cat"))] = cats.get(str(e.get("cat")), 0) + 1
        nccl = [e for e in events if e.get("cat") == "kernel" and "nccl" in str(e.get("name", "")).lower()]
        comms = [e for e in events if e.get("name") == "record_param_comms"]
        steps = [e for e in events if e.get("name") == "gpudash.step"]
        out[name] = {
            "traced_ms": statistics.median(ms), "traced_all_ms": [round(v, 2) for v in ms],
            "stop_s": round(stop_s, 3), "export_s": round(export_s, 3), "bytes": os.path.getsize(path),
            "events": len(events), "cats": cats, "step_markers": [(e.get("cat"), e.get("ph")) for e in steps[:3]],
            "nccl_kernels": len(nccl), "nccl_first": nccl[:2], "param_comms_first": comms[:2],
            "nccl_durs_us": [round(float(e.get("dur", 0)), 1) for e in nccl[:24]],
            "base_ns": trace.get("baseTimeNanoseconds"),
        }
        with open(path, "rb") as f, gzip.open(path + ".gz", "wb") as g:
            g.write(f.read())
        os.remove(path)
    out["untraced_after_ms"] = statistics.median(timed(args.steps))
    # the gradients' all-reduce apart: the same bytes in 25 MB buckets, after a barrier, CUDA events
    grads = [p for p in ddp.parameters()]
    total = sum(p.numel() for p in grads)
    flat = torch.zeros(total, device=device)
    bucket = 25 * 1024 * 1024 // 4
    pieces = [flat[i : i + bucket] for i in range(0, total, bucket)]
    times = []
    for _ in range(20):
        torch.cuda.synchronize()
        dist.barrier()
        torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for piece in pieces:
            dist.all_reduce(piece)
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    out["allreduce_apart_ms"] = statistics.median(times[5:])
    out["allreduce_bytes"] = total * 4
    out["allreduce_buckets"] = len(pieces)
    print("PROBE " + json.dumps(out, default=str), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
