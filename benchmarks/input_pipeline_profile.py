"""Why a rung of the input-pipeline ladder helps, or cannot, on this machine: a profile. Prints tables.

    python -m benchmarks.input_pipeline_profile [--samples 200] [--seconds 6 --windows 4 --warmup 8]
        [--rungs baseline,workers,...] [--no-train]

Part 1, one thread, no GPU: what a DataLoader worker spends on each step of one sample's chain,
per rung (median of ``--samples`` samples, with its 25–75% range for the total): the JPEG decode,
the crop, the tensor conversion, the mask with its dilation, the colour conversion, the scaling,
and for ``batch-transform`` its per-sample share of the batch's colour conversion in collate.

Part 2, training at the family's default batch on the default device: per rung, steps/s over
``--windows`` consecutive windows of ``--seconds`` after ``--warmup`` (mean with the 95% interval of
the window means: one build per rung, so it leaves out the run-to-run spread a sweep measures),
the machine's CPU busy share (/proc/stat), the loader workers' CPU time per sample, the main
process's CPU time per step, and the share of the loop's wall time spent waiting for a batch.
When the CPUs are saturated, a rung helps only by the CPU time per sample it saves; the table
shows how much that is.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torchvision.transforms as T
from PIL import Image
from torch.utils.data import default_collate

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpudash.stats.comparison import estimate_from_batches  # noqa: E402
from gpudash.core.textfmt import fmt_pm  # noqa: E402
from workloads.base import WorkloadOptions, available_cpus  # noqa: E402
from workloads.input_pipeline import (RandomMask, batch_transform, convert_color, per_sample_transforms,  # noqa: E402
                                      sample_jpeg, scale)
from workloads.factory import build  # noqa: E402
from workloads.registry import FAMILIES, Fix  # noqa: E402

# the rungs whose workers decode on the CPU (gpu-decode hands the JPEG bytes on), in the catalog's order
LADDER = tuple(v.name for v in FAMILIES["input_pipeline"].variants if Fix.GPU_DECODE not in v.fixes)
STAGES = ("decode", "crop", "to tensor", "mask + dilation", "colour", "scale", "colour in collate")
TICK = os.sysconf("SC_CLK_TCK")


def stage_name(step: Callable) -> str:
    if isinstance(step, T.RandomCrop):
        return "crop"
    if isinstance(step, T.PILToTensor):
        return "to tensor"
    if isinstance(step, RandomMask):
        return "mask + dilation"
    return {convert_color: "colour", scale: "scale"}[step]  # type: ignore[index]


def stage_times(rung: str, image_size: int, samples: int) -> tuple[dict[str, float], tuple[float, float, float]]:
    """ms per sample of each stage (medians), and the total's (median, 25th, 75th percentile)."""
    torch.set_num_threads(1)
    info = FAMILIES["input_pipeline"].variant(rung)
    chain = per_sample_transforms(info, image_size).transforms
    path = sample_jpeg()
    per_stage: dict[str, list[float]] = {}
    totals: list[float] = []
    outputs = []
    for i in range(samples + 5):
        times: dict[str, float] = {}
        t = time.perf_counter()
        img = Image.open(path)
        img.load()
        times["decode"] = time.perf_counter() - t
        x = img
        for step in chain:
            t = time.perf_counter()
            x = step(x)
            times[stage_name(step)] = time.perf_counter() - t
        if i >= 5:
            for k, v in times.items():
                per_stage.setdefault(k, []).append(v * 1000)
            totals.append(sum(times.values()) * 1000)
            outputs.append(x)
    if Fix.BATCH_COLOUR in info.fixes and Fix.GPU_COLOUR not in info.fixes:
        batch = default_collate(outputs[:64])
        t = time.perf_counter()
        for _ in range(5):
            batch_transform(batch)
        per_stage["colour in collate"] = [(time.perf_counter() - t) * 1000 / 5 / 64]
        totals = [v + per_stage["colour in collate"][0] for v in totals]
    q = statistics.quantiles(totals, n=4)
    return {k: statistics.median(v) for k, v in per_stage.items()}, (statistics.median(totals), q[0], q[2])


def cpu_ticks(pid: int) -> int:
    """utime + stime of one process, in clock ticks (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0
    return int(fields[11]) + int(fields[12])


def machine_busy() -> tuple[int, int]:
    """(busy ticks, all ticks) of every CPU, from /proc/stat."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = values[3] + values[4]
    return sum(values) - idle, sum(values)


def training(rung: str, seconds: float, windows: int, warmup: float) -> dict[str, float]:
    """One rung's training loop: steps/s per window and where the CPUs went."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.set_num_threads(max(1, available_cpus() // 4))
    with build("input_pipeline", device, WorkloadOptions(variant=rung)) as w:
        end = time.perf_counter() + warmup
        while time.perf_counter() < end:
            w.step()
        w.drain()
        me = os.getpid()
        workers = [p.pid for p in multiprocessing.active_children()]  # the loader's workers
        rates, waited, steps = [], 0.0, 0
        main0, work0, (busy0, all0) = cpu_ticks(me), sum(cpu_ticks(p) for p in workers), machine_busy()
        start = time.perf_counter()
        for _ in range(windows):
            n, t0 = 0, time.perf_counter()
            while time.perf_counter() - t0 < seconds:
                t = time.perf_counter()
                w._peek_input()  # the next batch, kept for the step: the wait for the loader
                waited += time.perf_counter() - t
                w.step()
                n += 1
            w.drain()
            rates.append(n / (time.perf_counter() - t0))
            steps += n
        wall = time.perf_counter() - start
        main1, work1, (busy1, all1) = cpu_ticks(me), sum(cpu_ticks(p) for p in workers), machine_busy()
        batch = w.batch_size
    e = estimate_from_batches(rates)
    return {"steps/s": fmt_pm(e), "busy %": 100 * (busy1 - busy0) / max(1, all1 - all0),
            "worker ms/sample": 1000 * (work1 - work0) / TICK / (steps * batch),
            "main ms/step": 1000 * (main1 - main0) / TICK / steps, "wait %": 100 * waited / wall,
            "workers": len(workers), "batch": batch}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--samples", type=int, default=200)
    p.add_argument("--seconds", type=float, default=6.0)
    p.add_argument("--windows", type=int, default=4, help="4 at least for an interval")
    p.add_argument("--warmup", type=float, default=8.0)
    p.add_argument("--rungs", default=",".join(LADDER))
    p.add_argument("--no-train", action="store_true", help="part 1 only")
    args = p.parse_args()
    rungs = args.rungs.split(",")
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
    size = FAMILIES["input_pipeline"].defaults("cuda" if torch.cuda.is_available() else "cpu").image_size
    print(f"# input-pipeline profile — {device} · {available_cpus()} CPUs · torch {torch.__version__} · "
          f"{time.strftime('%Y-%m-%d')}\n`python -m benchmarks.input_pipeline_profile {' '.join(sys.argv[1:])}`\n")
    print(f"One thread, ms per sample ({args.samples} samples, medians; image {size} px):\n")
    print("| rung | " + " | ".join(STAGES) + " | total (25–75%) |")
    print("|---|" + "---:|" * (len(STAGES) + 1))
    for rung in rungs:
        if Fix.GPU_DECODE in FAMILIES["input_pipeline"].variant(rung).fixes:
            continue  # no per-sample chain: the workers only read the file
        stages, (total, q1, q3) = stage_times(rung, size, args.samples)
        cells = [f"{stages[s]:.2f}" if s in stages else "—" for s in STAGES]
        print(f"| {rung} | " + " | ".join(cells) + f" | {total:.2f} ({q1:.2f}–{q3:.2f}) |", flush=True)
    if args.no_train:
        return
    print(f"\nTraining, {args.windows} windows × {args.seconds:g} s after {args.warmup:g} s of warm-up:\n")
    print("| rung | workers | batch | steps/s (95% CI) | CPUs busy | worker CPU ms/sample | main CPU ms/step | "
          "loop waiting for a batch |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for rung in rungs:
        r = training(rung, args.seconds, args.windows, args.warmup)
        print(f"| {rung} | {r['workers']} | {r['batch']} | {r['steps/s']} | {r['busy %']:.0f}% | "
              f"{r['worker ms/sample']:.2f} | {r['main ms/step']:.0f} | {r['wait %']:.0f}% |", flush=True)


if __name__ == "__main__":
    main()
