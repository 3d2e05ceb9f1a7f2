"""What a configuration change leaves behind on a GPU: the workload process's open file
descriptors across four augment `cpu` loaders (8 workers, pinned), and the CUDA allocator's
reserved memory across serial ↔ pipelined encdec changes, without and with ``empty_cache``.
Prints lines, one per configuration (the diagnosis behind docs/soak-gpu.md).

    python -m benchmarks.reconfigure_leaks [--modes plain,plain,gc,close_procs] [--no-memory]

Modes, per loader: ``plain`` closes the workload as the engine does; ``gc`` also runs the garbage
collector; ``close_procs`` also closes the workers' Process objects. Since the fixes (workloads
close their workers' pipes and empty the CUDA cache when they release a configuration) both
parts read flat; docs/soak-gpu.md has the figures from before them (commit af19d7e).
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workloads.base import WorkloadOptions  # noqa: E402
from workloads.factory import build  # noqa: E402


def fds() -> dict[str, int]:
    """Open descriptors by what they point at."""
    out: dict[str, int] = {}
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        key = target.split(":")[0] if ":" in target else ("/dev/shm" if target.startswith("/dev/shm") else target)
        out[key] = out.get(key, 0) + 1
    return out


def count() -> int:
    return len(os.listdir("/proc/self/fd"))


def loaders(modes: list[str]) -> None:
    print("start fds", count(), fds(), flush=True)
    for mode in modes:
        w = build("augment", "cuda", WorkloadOptions(variant="cpu", batch_size=32, workers=8))
        for _ in range(10):
            w.step()
        batches = w.batches
        procs = list(getattr(batches, "_workers", []))
        w.close()
        del w
        if mode == "close_procs":
            for p in procs:
                p.close()
        del batches, procs
        before_gc = count()
        if mode == "gc":
            gc.collect()
        print(mode, "fds", before_gc, "after gc" if mode == "gc" else "", count(), fds(), flush=True)
    gc.collect()
    print("final after gc", count(), fds(), flush=True)


def encdec_changes(rounds: int, empty_each: bool) -> None:
    """Serial then pipelined encdec, ``rounds`` times: reserved memory after each configuration."""
    for _ in range(rounds):
        for v in ["serial", "pipelined"]:
            with build("encdec", "cuda", WorkloadOptions(variant=v, batch_size=8)) as w:
                for _ in range(20):
                    w.step()
            if empty_each:
                torch.cuda.empty_cache()
            else:
                torch.cuda.synchronize()
            label = "with empty_cache each: encdec" if empty_each else "encdec"
            print(label, v, "reserved MiB", round(torch.cuda.memory_reserved() / 2**20), flush=True)


def memory() -> None:
    encdec_changes(4, empty_each=False)
    torch.cuda.empty_cache()
    print("after empty_cache reserved", round(torch.cuda.memory_reserved() / 2**20))
    encdec_changes(3, empty_each=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--modes", default="plain,plain,gc,close_procs")
    p.add_argument("--no-memory", action="store_true")
    args = p.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("reconfigure_leaks needs CUDA (it measures pinned loaders and the CUDA allocator)")
    loaders(args.modes.split(","))
    if not args.no_memory:
        memory()


if __name__ == "__main__":
    main()
