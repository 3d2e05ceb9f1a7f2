"""Steps/s of every workload variant in a bare loop (no engine): the figures to compare with docs/workloads.md.

    python benchmarks/workloads_bare.py [--seconds 4] [--family encdec] [--batch-size N]

Prints a markdown table headed with the device, torch version and date, read at run time.
"""

from __future__ import annotations

import argparse
import datetime
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from workloads.base import WorkloadOptions  # noqa: E402
from workloads.factory import build  # noqa: E402
from workloads.registry import FAMILIES  # noqa: E402


def measure(name: str, variant: str, device: str, seconds: float, batch_size: int | None) -> tuple[float, int]:
    with build(name, device, WorkloadOptions(variant=variant, batch_size=batch_size)) as w:
        for _ in range(5):
            w.step()
        w.drain()
        steps, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            w.step()
            steps += 1
        w.drain()
        return steps / (time.perf_counter() - start), w.batch_size


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=4.0)
    p.add_argument("--family", action="append", choices=list(FAMILIES))
    p.add_argument("--batch-size", type=int)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = p.parse_args()
    dev = torch.cuda.get_device_name() if args.device.startswith("cuda") else "CPU"
    print(f"# bare-loop throughput — {dev}, torch {torch.__version__}, {datetime.date.today()}\n")
    print("| workload | variant | batch | steps/s | samples/s |")
    print("|---|---|---:|---:|---:|")
    for name in args.family or list(FAMILIES):
        for v in FAMILIES[name].variants:
            if v.needs_cuda and not args.device.startswith("cuda"):
                continue
            rate, bs = measure(name, v.name, args.device, args.seconds, args.batch_size)
            print(f"| {name} | {v.name} | {bs} | {rate:.1f} | {rate * bs:.0f} |", flush=True)


if __name__ == "__main__":
    main()
