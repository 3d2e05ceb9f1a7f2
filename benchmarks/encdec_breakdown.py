"""Where an encdec step's time goes: copy, encoder, decoder step, and the overlap bound.

    python benchmarks/encdec_breakdown.py [--batch-size 8] [--benchmark-cudnn]

Each stage is timed alone over many iterations with CUDA events (median of 5 repeats);
then serial and pipelined steps/s are measured in the same run. The overlap bound is
1 / max(encoder stage, decoder stage).
"""

from __future__ import annotations

import argparse
import datetime
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from workloads.base import WorkloadOptions  # noqa: E402
from workloads.factory import build  # noqa: E402


def timed(fn, iters: int = 50) -> float:
    """Median ms per call of ``fn`` over 5 repeats of ``iters`` calls."""
    for _ in range(5):
        fn()
    out = []
    for _ in range(5):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            fn()
        end.record()
        end.synchronize()
        out.append(start.elapsed_time(end) / iters)
    return statistics.median(out)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--batch-size", type=int, action="append")
    p.add_argument("--benchmark-cudnn", action="store_true")
    args = p.parse_args()
    torch.backends.cudnn.benchmark = args.benchmark_cudnn
    print(f"# encdec breakdown — {torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"{datetime.date.today()}, cudnn.benchmark={args.benchmark_cudnn}\n")
    print("| batch | copy ms | encoder ms | decoder step ms | serial steps/s | pipelined steps/s | bound steps/s |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for bs in args.batch_size or [8, 16, 32]:
        w = build("encdec", "cuda", WorkloadOptions(batch_size=bs))
        host = w.pool.next()
        dev = tuple(t.to("cuda") for t in host)
        feats, labels = w.encode(*host)
        copy = timed(lambda: tuple(t.to("cuda", non_blocking=True) for t in host))
        enc = timed(lambda: w.encode(*host))
        dec = timed(lambda: w.train_decoder(feats, labels))
        serial = 1000 / timed(w.step)
        w.set_variant("pipelined")
        piped = 1000 / timed(w.step)
        w.close()
        del dev
        print(f"| {bs} | {copy:.3f} | {enc:.3f} | {dec:.3f} | {serial:.1f} | {piped:.1f} | {1000 / max(enc, dec):.1f} |",
              flush=True)


if __name__ == "__main__":
    main()
