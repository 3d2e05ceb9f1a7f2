"""Issue 53's targets: a job's figures are its training's. Each reference job is recorded with
``gpudash record run.csv -- CMD``, and gpudash's summary (steps/s over training steps, with its 95%
interval) and goodput (training's share of the wall time, from run.json) are set beside the
script's own timing of its training steps (its ``JOB … train_s=… steps_per_s=…`` line); a stall job
times how long gpudash takes to call a hung job stalled and checks that it names the line. The CPU
jobs by default; ``gpu-resnet`` and ``gpu-hf`` on a GPU."""

from __future__ import annotations

import re
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.cases.shared.gpudash_outputs import rows, run_gpudash, sidecar
from benchmarks.harness.case import BadParameter
from benchmarks.harness.context import Run
from benchmarks.harness.params import param
from benchmarks.harness.stamp import ROOT

PHASES_LOOP = str(ROOT / "tests" / "data" / "jobs" / "phases_loop.py")
JOBS = ROOT / "benchmarks" / "jobs"


@dataclass(frozen=True)
class Job:
    name: str
    command: list[str]
    rate_within: float | None  # the largest relative difference from the job's own rate that meets the target
    goodput_within: float | None = None  # points
    max_half_width: float | None = None  # the interval's relative half-width
    stall: bool = False  # a hung job: the time to "stalled" and the line it names
    duration_s: float | None = None


REFERENCE_JOBS = {
    "cpu-phases": Job(
        "0.5 s steps, evaluation every 8, a checkpoint every 16, 2 s start, 3 s exit (CPU)",
        [PHASES_LOOP, "--steps", "40", "--step-s", "0.5", "--eval-every", "8", "--save-every", "16"]
        + ["--start-s", "2", "--exit-s", "3"],
        0.05,
        goodput_within=5.0,
    ),
    "cpu-slow": Job("2 s steps, 13 of them (CPU)", [PHASES_LOOP, "--steps", "13", "--step-s", "2"], 0.04, None, 0.10),
    "cpu-stall": Job(
        "hangs on a lock at its 10th step, 2 DataLoader workers (CPU)",
        [PHASES_LOOP, "--steps", "1000", "--step-s", "0.2", "--hang-at", "10", "--workers", "2"],
        None,
        stall=True,
        duration_s=70.0,
    ),
    "gpu-resnet": Job(
        "ResNet-50, persistent workers, evaluation and checkpoints (its CUDA-event figure)",
        [str(JOBS / "resnet_persistent.py"), "--steps", "600"],
        0.02,
    ),
    "gpu-hf": Job(
        "Hugging Face Trainer, 600 steps, eval_steps 100, save_steps 200 (its callback's CUDA-event figure)",
        [str(JOBS / "hf_phases.py"), "--steps", "600", "--eval-steps", "100", "--save-steps", "200"],
        0.05,
    ),
}


@dataclass(frozen=True)
class Params:
    jobs: tuple[str, ...] = param(("cpu-phases", "cpu-slow", "cpu-stall"), f"the jobs: {', '.join(REFERENCE_JOBS)}")
    keep: str | None = param(None, "copy each job's recording (CSV and JSON) into this folder")


def job_line(text: str) -> dict[str, str]:
    for line in reversed(text.splitlines()):
        if line.startswith("JOB "):
            return dict(part.split("=", 1) for part in line.split()[1:] if "=" in part)
    return {}


def summary(path: Path) -> tuple[float | None, float | None, float | None]:
    """The last summary row's steps/s and its interval."""
    found: tuple[float | None, float | None, float | None] = (None, None, None)
    for row in rows(path, ("summary",)):
        if row["steps_per_s"] is not None:
            found = (float(row["steps_per_s"]), row["ci_low"], row["ci_high"])
    return found


def verdicts(job: Job, ratio: float, own_rate: float, low: float | None, high: float | None, goodputs: tuple) -> str:
    """The job's targets, each met or missed."""
    own_goodput, goodput = goodputs
    out = []
    if job.rate_within is not None:
        inside = low is not None and high is not None and low <= own_rate <= high
        out.append("rate " + ("met" if abs(ratio - 1) <= job.rate_within else "MISSED"))
        out.append("its figure " + ("inside" if inside else "outside") + " gpudash's interval")
    if job.goodput_within is not None and goodput is not None:
        out.append("goodput " + ("met" if abs(goodput - own_goodput) <= job.goodput_within else "MISSED"))
    if job.max_half_width is not None:
        half = (high - low) / 2 / (ratio * own_rate) if low is not None and high is not None else None
        out.append("interval " + ("met" if half is not None and half <= job.max_half_width else "MISSED"))
    return "; ".join(out)


def run_job(key: str, job: Job, folder: Path) -> list[str]:
    """One job recorded: its row of the table."""
    out = folder / f"{key}.csv"
    command = ["record", str(out), "--force", *(["--duration", str(job.duration_s)] if job.duration_s else [])]
    started = time.monotonic()
    done = run_gpudash(*command, "--", sys.executable, *job.command, timeout=900, check=False)
    took = time.monotonic() - started
    text = done.stdout + done.stderr
    meta = sidecar(out)
    if job.stall:
        return stall_row(key, job, text)
    own = job_line(text)
    mean, low, high = summary(out) if out.exists() else (None, None, None)
    if not own or mean is None:
        last = (text.strip().splitlines() or [""])[-1][:100]
        return [key, job.name, "–", "–", "–", "–", "–", f"failed (exit {done.returncode}): {last}"]
    own_rate = float(own["steps_per_s"])
    ratio = mean / own_rate
    half = (high - low) / 2 / mean if low is not None and high is not None else None
    own_goodput = 100 * float(own["train_s"]) / (meta.get("wall_s") or took)
    goodput = meta.get("goodput_pct")
    interval = f" [{low:.4g}–{high:.4g}]" if low is not None and high is not None else " (no interval)"
    return [
        key,
        job.name,
        f"{own_rate:.4g}",
        f"{mean:.4g}{interval}",
        f"{ratio:.4f}" + (f", ±{100 * half:.1f}%" if half is not None else ""),
        f"{own_goodput:.1f}%",
        f"{goodput:.1f}%" if goodput is not None else "–",
        verdicts(job, ratio, own_rate, low, high, (own_goodput, goodput)),
    ]


def stall_row(key: str, job: Job, text: str) -> list[str]:
    """How long after its last step gpudash called the job stalled, and what line it named."""
    said = re.search(r"\[\s*([\d.]+)s\] stalled: (no step for (\d+) s.*)", text)
    if not said:
        return [key, job.name, "–", "no stall told", "–", "–", "–", "MISSED"]
    line, seconds = said.group(2), float(said.group(3))
    named = "phases_loop.py:" in line and "lock.acquire(" in line
    where = line.split(": ", 1)[-1]  # where the rank that stalled first waits
    verdict = "met" if seconds <= 60 and named else "MISSED"
    return [key, job.name, "–", f"stalled after {seconds:.0f} s without a step", where, "–", "–", verdict]


def measure(run: Run, p: Params) -> None:
    unknown = set(p.jobs) - set(REFERENCE_JOBS)
    if unknown:
        raise BadParameter(f"no job {sorted(unknown)}; the jobs: {', '.join(REFERENCE_JOBS)}")
    run.device = "cuda" if any(k.startswith("gpu") for k in p.jobs) else "cpu"
    cols = ["case", "what", "its own steps/s", "gpudash steps/s [95% CI]", "ratio, ±", "its goodput", "gpudash goodput"]
    table = run.table([*cols, "verdict"])
    with tempfile.TemporaryDirectory(prefix="job-phases-") as scratch:
        for key in p.jobs:
            row = run_job(key, REFERENCE_JOBS[key], Path(scratch))
            run.row(table, *(cell.replace("|", "\\|") for cell in row))
            if p.keep:
                Path(p.keep).mkdir(parents=True, exist_ok=True)
                for kept in Path(scratch).glob(f"{key}.*"):
                    shutil.copy(kept, Path(p.keep) / kept.name)
