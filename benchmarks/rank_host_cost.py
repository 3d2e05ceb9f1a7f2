"""Host memory of one data-parallel rank: what ``gpudash.host.host_budget`` counts per rank before it
lets ``--nproc`` start.

    python benchmarks/rank_host_cost.py [--families encdec,sync_loss] [--steps 30] [--device cpu]

For each family, ``gpudash record --nproc 2`` runs on the device; every 0.1 s the ranks (the
workload process's children that import torch) are read from ``/proc/PID/smaps_rollup``: RSS
(shared library pages counted in full) and PSS (shared pages split between the processes that
map them: what each rank adds to the machine's memory). Prints a markdown table headed with the
device, torch version and date, read at run time; the largest PSS is the per-rank figure. Takes
about a minute per family on a 2-core CPU.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpudash.core.procgroup import members  # noqa: E402
from gpudash.core.proctree import children, parent_of  # noqa: E402

MIB = 2**20


def _rollup(pid: int) -> tuple[int, int] | None:
    """(RSS, PSS) in bytes of ``pid`` from smaps_rollup; None when it is gone."""
    found: dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                key, _, rest = line.partition(":")
                if key in ("Rss", "Pss"):
                    found[key] = int(rest.split()[0]) * 1024
    except (OSError, ValueError):
        return None
    return (found["Rss"], found["Pss"]) if len(found) == 2 else None


def measure(family: str, steps: int, device: str) -> dict[str, int]:
    """Peak RSS and PSS of a rank and of the launcher during a ``--nproc 2`` run of ``family``."""
    with tempfile.TemporaryDirectory() as tmp:
        argv = [
            sys.executable,
            "-m",
            "gpudash",
            "record",
            os.path.join(tmp, "run.csv"),
            "-w",
            family,
            "--device",
            device,
            "--nproc",
            "2",
            "--steps",
            str(steps),
            "-q",
        ]
        proc = subprocess.Popen(argv, cwd=tmp, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        peak = {"rank_rss": 0, "rank_pss": 0, "launcher_rss": 0, "launcher_pss": 0}
        launcher: int | None = None
        while proc.poll() is None:
            if launcher is None:
                launcher = next((p for p in children(proc.pid) if _leads_group(p)), None)
            if launcher is not None:
                for pid in members(launcher):
                    figures = _rollup(pid)
                    if figures is None:
                        continue
                    who = "launcher" if pid == launcher else "rank" if parent_of(pid) == launcher else None
                    if who is None:
                        continue  # loader workers, the resource tracker
                    peak[f"{who}_rss"] = max(peak[f"{who}_rss"], figures[0])
                    peak[f"{who}_pss"] = max(peak[f"{who}_pss"], figures[1])
            time.sleep(0.1)
        if proc.returncode != 0:
            raise SystemExit(f"{family}: gpudash exited {proc.returncode}: {proc.stderr.read() if proc.stderr else ''}")
        return peak


def _leads_group(pid: int) -> bool:
    """The workload process makes its own process group (gpudash.engine.child); the resource tracker does not."""
    try:
        return os.getpgid(pid) == pid
    except OSError:
        return False


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--families", default="encdec,augment,sync_loss,input_pipeline")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--device", default="cpu")
    args = p.parse_args()
    import torch

    print(
        f"# Host memory of a data-parallel rank ({args.device}; {platform.node()}, "
        f"torch {torch.__version__}, {datetime.date.today().isoformat()})\n"
    )
    print(f"`python benchmarks/rank_host_cost.py --device {args.device} --steps {args.steps}`\n")
    print("| family | rank RSS MiB | rank PSS MiB | launcher RSS MiB | launcher PSS MiB |")
    print("|---|---:|---:|---:|---:|")
    worst = 0
    for family in args.families.split(","):
        peak = measure(family, args.steps, args.device)
        worst = max(worst, peak["rank_pss"])
        print(
            f"| {family} | {peak['rank_rss'] / MIB:.0f} | {peak['rank_pss'] / MIB:.0f} | "
            f"{peak['launcher_rss'] / MIB:.0f} | {peak['launcher_pss'] / MIB:.0f} |",
            flush=True,
        )
    print(f"\nlargest rank PSS: {worst / MIB:.0f} MiB")


if __name__ == "__main__":
    main()
