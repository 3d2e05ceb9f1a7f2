"""Where an input-pipeline step goes: per-sample CPU cost of each rung, the loader alone, and the
loader with training, at the family's default batch. Prints a table (one run each: a probe, not
the published figures, which come from ``gpudash sweep --preset input-pipeline``).

    python -m benchmarks.input_pipeline_probe [--seconds 15] [--warmup 8] [--workers N ...]
"""

from __future__ import annotations

import argparse
import time

import torch
from PIL import Image

from workloads.base import WorkloadOptions, available_cpus
from workloads.input_pipeline import per_sample_transforms, sample_jpeg
from workloads.factory import build
from workloads.registry import FAMILIES


def ms_per_sample(variant: str, image_size: int, n: int = 100) -> float:
    """One process, one thread: what a DataLoader worker spends on one sample."""
    torch.set_num_threads(1)
    transform = per_sample_transforms(FAMILIES["input_pipeline"].variant(variant), image_size)
    path = sample_jpeg()
    for _ in range(5):
        transform(Image.open(path))
    t = time.perf_counter()
    for _ in range(n):
        transform(Image.open(path))
    return (time.perf_counter() - t) * 1000 / n


def seconds_per_step(variant: str, workers: int | None, seconds: float, warmup: float, train: bool) -> float:
    """Seconds per batch of the loader alone (``train=False``) or of whole training steps."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    with build("input_pipeline", device, WorkloadOptions(variant=variant, workers=workers)) as w:
        def one() -> None:
            if train:
                w.step()
            else:
                w._next_input()
        end = time.perf_counter() + warmup
        while time.perf_counter() < end:
            one()
        w.drain()
        n, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            one()
            n += 1
        w.drain()
        return (time.perf_counter() - start) / n


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--seconds", type=float, default=15.0)
    p.add_argument("--warmup", type=float, default=8.0)
    p.add_argument("--workers", type=int, nargs="*", default=[], help="extra worker counts for the last rung")
    args = p.parse_args()
    fam = FAMILIES["input_pipeline"]
    size = fam.defaults("cuda" if torch.cuda.is_available() else "cpu").image_size
    print(f"# {torch.cuda.get_device_name() if torch.cuda.is_available() else 'cpu'} · {available_cpus()} CPUs · "
          f"torch {torch.__version__} · {time.strftime('%Y-%m-%d')}")
    print("| rung | workers | ms/sample, 1 thread | loader alone s/batch | training s/step |")
    print("|---|---:|---:|---:|---:|")
    rows = [(v.name, None) for v in fam.variants] + [(fam.variants[-1].name, n) for n in args.workers]
    for name, workers in rows:
        per_sample = ms_per_sample(name, size)
        loader = seconds_per_step(name, workers, args.seconds, args.warmup, train=False)
        step = seconds_per_step(name, workers, args.seconds, args.warmup, train=True)
        shown = workers if workers is not None else "default"
        print(f"| {name} | {shown} | {per_sample:.2f} | {loader:.3f} | {step:.3f} |", flush=True)


if __name__ == "__main__":
    main()
