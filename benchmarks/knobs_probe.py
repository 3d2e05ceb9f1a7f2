"""A quick look at what each knob combination does to a step (not the published figures: those
come from ``gpudash sweep --preset beyond``, with intervals). Prints a table of steps/s.

    python -m benchmarks.knobs_probe [--seconds 2] [--only encdec]

Each row builds the workload with the knobs (compile / capture happen in its warm-up), runs
warm-up steps, then times steps for ``--seconds`` with a device synchronize at both ends.
"""

from __future__ import annotations

import argparse
import time

import torch

from workloads.base import WorkloadOptions
from workloads.knobs import parse_knobs
from workloads.factory import build

BASE3 = "amp=bf16,channels_last,cudnn_benchmark"
ROWS: list[tuple[str, str, int, str]] = [
    *[("encdec", v, b, k) for b in (8, 32) for v, k in (
        ("serial", "none"), ("serial", "cudnn_benchmark"), ("serial", "channels_last"), ("serial", "amp=bf16"),
        ("serial", BASE3), ("serial", "cuda_graph"), ("serial", BASE3 + ",cuda_graph"),
        ("serial", "compile"), ("pipelined", "none"), ("pipelined", BASE3 + ",cuda_graph"),
        ("pipelined", "channels_last,cudnn_benchmark,cuda_graph"))],
    ("encdec", "serial", 16, "none"), ("encdec", "pipelined", 16, "none"),
    *[("sync_loss", v, b, k) for b in (8, 32) for v, k in (
        ("sync-heavy", "none"), ("fixed", "none"), ("fixed", BASE3), ("fixed", "cuda_graph"),
        ("fixed", BASE3 + ",cuda_graph"), ("fixed", "amp=bf16,cuda_graph"), ("fixed", "compile"))],
    *[("augment", v, 32, k) for v, k in (
        ("pipelined", "none"), ("pipelined", BASE3), ("pipelined", BASE3 + ",cuda_graph"),
        ("pipelined", "cuda_graph"), ("gpu-vectorized", BASE3 + ",cuda_graph"))],
]


def steps_per_s(name: str, variant: str, batch: int, knobs: str, seconds: float) -> tuple[float, float]:
    """(steps/s, seconds the build and warm-up took)."""
    t0 = time.perf_counter()
    with build(name, "cuda", WorkloadOptions(variant=variant, batch_size=batch, knobs=parse_knobs(knobs))) as w:
        for _ in range(10):
            w.step()
        torch.cuda.synchronize()
        setup = time.perf_counter() - t0
        n, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            for _ in range(10):
                w.step()
            n += 10
        torch.cuda.synchronize()
        return n / (time.perf_counter() - start), setup


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--seconds", type=float, default=2.0)
    p.add_argument("--only", default=None, help="one family")
    args = p.parse_args()
    print(f"# {torch.cuda.get_device_name()} · torch {torch.__version__} · {time.strftime('%Y-%m-%d')}")
    print("| family | variant | batch | knobs | steps/s | build+warm-up s |")
    print("|---|---|---:|---|---:|---:|")
    for name, variant, batch, knobs in ROWS:
        if args.only and name != args.only:
            continue
        try:
            rate, setup = steps_per_s(name, variant, batch, knobs, args.seconds)
            print(f"| {name} | {variant} | {batch} | {knobs} | {rate:.1f} | {setup:.1f} |", flush=True)
        except Exception as exc:  # noqa: BLE001 - a probe reports and goes on
            print(f"| {name} | {variant} | {batch} | {knobs} | failed: {type(exc).__name__}: "
                  f"{str(exc).splitlines()[0][:120]} | |", flush=True)


if __name__ == "__main__":
    main()
