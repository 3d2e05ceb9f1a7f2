"""Host memory of one data-parallel rank: what ``gpudash.host.host_budget`` counts per rank before it
lets ``--nproc`` start.

For each family, ``gpudash record --nproc 2`` runs on the device; every 0.1 s the ranks (the
workload process's children that import torch) are read from ``/proc/PID/smaps_rollup``: RSS
(shared library pages counted in full) and PSS (shared pages split between the processes that map
them: what each rank adds to the machine's memory). The largest PSS is the per-rank figure. About a
minute a family on a 2-core CPU."""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from dataclasses import dataclass

from benchmarks.cases.shared.gpudash_outputs import gpudash_argv
from benchmarks.harness.context import Run
from benchmarks.harness.params import param
from benchmarks.harness.result import Figure

MIB = 2**20


@dataclass(frozen=True)
class Params:
    families: tuple[str, ...] = param(("encdec", "augment", "sync_loss", "input_pipeline"), "the families")
    steps: int = param(30, "steps of each run")
    device: str = param("cpu", "the device the ranks run on")


def rollup(pid: int) -> tuple[int, int] | None:
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


def leads_group(pid: int) -> bool:
    """The workload process makes its own process group (gpudash.engine.child); the resource tracker does not."""
    try:
        return os.getpgid(pid) == pid
    except OSError:
        return False


def look(launcher: int, peak: dict[str, int]) -> None:
    """The launcher's and its ranks' RSS and PSS now, into ``peak`` where larger."""
    from gpudash.core.procgroup import members
    from gpudash.core.proctree import parent_of

    for pid in members(launcher):
        figures = rollup(pid)
        who = "launcher" if pid == launcher else "rank" if parent_of(pid) == launcher else None
        if figures is None or who is None:
            continue  # gone; loader workers, the resource tracker
        peak[f"{who}_rss"] = max(peak[f"{who}_rss"], figures[0])
        peak[f"{who}_pss"] = max(peak[f"{who}_pss"], figures[1])


def measure_family(family: str, steps: int, device: str) -> dict[str, int]:
    """Peak RSS and PSS of a rank and of the launcher during a ``--nproc 2`` run of ``family``."""
    from gpudash.core.proctree import children

    with tempfile.TemporaryDirectory() as tmp:
        argv = gpudash_argv("record", os.path.join(tmp, "run.csv"), "-w", family, "--device", device)
        argv += ["--nproc", "2", "--steps", str(steps), "-q"]
        proc = subprocess.Popen(argv, cwd=tmp, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        peak = {"rank_rss": 0, "rank_pss": 0, "launcher_rss": 0, "launcher_pss": 0}
        launcher: int | None = None
        while proc.poll() is None:
            if launcher is None:
                launcher = next((p for p in children(proc.pid) if leads_group(p)), None)
            if launcher is not None:
                look(launcher, peak)
            time.sleep(0.1)
        if proc.returncode != 0:
            raise RuntimeError(
                f"{family}: gpudash exited {proc.returncode}: {proc.stderr.read() if proc.stderr else ''}"
            )
        return peak


def measure(run: Run, p: Params) -> None:
    run.comment(f"Host memory of a data-parallel rank ({p.device})")
    table = run.table(
        ["family", "rank RSS MiB", "rank PSS MiB", "launcher RSS MiB", "launcher PSS MiB"],
        ["---", "---:", "---:", "---:", "---:"],
    )
    worst = 0
    for family in p.families:
        peak = measure_family(family, p.steps, p.device)
        worst = max(worst, peak["rank_pss"])
        cells = [f"{peak[k] / MIB:.0f}" for k in ("rank_rss", "rank_pss", "launcher_rss", "launcher_pss")]
        run.row(table, family, *cells)
    run.line()
    run.say("largest rank PSS", Figure("value", f"largest rank PSS: {worst / MIB:.0f} MiB", worst / MIB, unit="MiB"))
