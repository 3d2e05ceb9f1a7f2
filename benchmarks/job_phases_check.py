"""Issue 53's targets: a job's figures are its training's. Each case records a user's script with
``gpudash record run.csv -- CMD`` and sets gpudash's summary (steps/s over training steps, with its
95% interval) and goodput (training's share of the wall time, from run.json) beside the script's
own timing of its training steps (its ``JOB … train_s=… steps_per_s=…`` line); a stall case times
how long gpudash takes to call a hung job stalled and checks that it names the line.

    python benchmarks/job_phases_check.py                       # the CPU cases
    python benchmarks/job_phases_check.py --case gpu-resnet --case gpu-hf   # on a GPU

Prints a Markdown table (and writes it with ``--out``), with the machine, torch and the date.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PHASES_LOOP = str(ROOT / "tests" / "data" / "jobs" / "phases_loop.py")
JOBS = ROOT / "benchmarks" / "jobs"


@dataclass(frozen=True)
class Case:
    name: str
    command: list[str]
    rate_within: float | None  # the largest relative difference from the job's own rate that meets the target
    goodput_within: float | None = None  # points
    max_half_width: float | None = None  # the interval's relative half-width
    stall: bool = False  # a hung job: the time to "stalled" and the line it names
    duration_s: float | None = None


CASES = {
    "cpu-phases": Case(
        "0.5 s steps, evaluation every 8, a checkpoint every 16, 2 s start, 3 s exit (CPU)",
        [PHASES_LOOP, "--steps", "40", "--step-s", "0.5", "--eval-every", "8", "--save-every", "16"]
        + ["--start-s", "2", "--exit-s", "3"],
        0.05,
        goodput_within=5.0,
    ),
    "cpu-slow": Case("2 s steps, 13 of them (CPU)", [PHASES_LOOP, "--steps", "13", "--step-s", "2"], 0.04, None, 0.10),
    "cpu-stall": Case(
        "hangs on a lock at its 10th step, 2 DataLoader workers (CPU)",
        [PHASES_LOOP, "--steps", "1000", "--step-s", "0.2", "--hang-at", "10", "--workers", "2"],
        None,
        stall=True,
        duration_s=70.0,
    ),
    "gpu-resnet": Case(
        "ResNet-50, persistent workers, evaluation and checkpoints (its CUDA-event figure)",
        [str(JOBS / "resnet_persistent.py"), "--steps", "600"],
        0.02,
    ),
    "gpu-hf": Case(
        "Hugging Face Trainer, 600 steps, eval_steps 100, save_steps 200 (its callback's CUDA-event figure)",
        [str(JOBS / "hf_phases.py"), "--steps", "600", "--eval-steps", "100", "--save-steps", "200"],
        0.05,
    ),
}


def job_line(text: str) -> dict[str, str]:
    for line in reversed(text.splitlines()):
        if line.startswith("JOB "):
            return dict(part.split("=", 1) for part in line.split()[1:] if "=" in part)
    return {}


def summary(path: Path) -> tuple[float | None, float | None, float | None]:
    """The last summary row's steps/s and its interval."""
    found: tuple[float | None, float | None, float | None] = (None, None, None)
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            if row["row_kind"] == "summary" and row["steps_per_s"]:
                found = tuple(float(row[k]) if row[k] else None for k in ("steps_per_s", "ci_low", "ci_high"))  # type: ignore[assignment]
    return found


def run_case(key: str, case: Case, folder: Path) -> list[str]:
    out = folder / f"{key}.csv"
    command = [sys.executable, "-m", "gpudash", "record", str(out), "--force"]
    if case.duration_s:
        command += ["--duration", str(case.duration_s)]
    started = time.monotonic()
    done = subprocess.run([*command, "--", sys.executable, *case.command], capture_output=True, text=True, timeout=900)
    took = time.monotonic() - started
    text = done.stdout + done.stderr
    meta = json.loads(out.with_suffix(".json").read_text()) if out.with_suffix(".json").exists() else {}
    if case.stall:
        return stall_row(key, case, text, meta)
    own = job_line(text)
    mean, low, high = summary(out) if out.exists() else (None, None, None)
    if not own or mean is None:
        last = (text.strip().splitlines() or [""])[-1][:100]
        return [key, case.name, "–", "–", "–", "–", "–", f"failed (exit {done.returncode}): {last}"]
    own_rate = float(own["steps_per_s"])
    ratio = mean / own_rate
    half = (high - low) / 2 / mean if low is not None and high is not None else None
    wall = meta.get("wall_s") or took
    own_goodput = 100 * float(own["train_s"]) / wall
    goodput = meta.get("goodput_pct")
    verdicts = []
    if case.rate_within is not None:
        inside = low is not None and high is not None and low <= own_rate <= high
        verdicts.append("rate " + ("met" if abs(ratio - 1) <= case.rate_within else "MISSED"))
        verdicts.append("its figure " + ("inside" if inside else "outside") + " gpudash's interval")
    if case.goodput_within is not None and goodput is not None:
        verdicts.append("goodput " + ("met" if abs(goodput - own_goodput) <= case.goodput_within else "MISSED"))
    if case.max_half_width is not None:
        verdicts.append("interval " + ("met" if half is not None and half <= case.max_half_width else "MISSED"))
    interval = f" [{low:.4g}–{high:.4g}]" if low is not None and high is not None else " (no interval)"
    return [
        key,
        case.name,
        f"{own_rate:.4g}",
        f"{mean:.4g}{interval}",
        f"{ratio:.4f}" + (f", ±{100 * half:.1f}%" if half is not None else ""),
        f"{own_goodput:.1f}%",
        f"{goodput:.1f}%" if goodput is not None else "–",
        "; ".join(verdicts),
    ]


def stall_row(key: str, case: Case, text: str, meta: dict[str, object]) -> list[str]:
    """How long after its last step gpudash called the job stalled, and what line it named."""
    said = re.search(r"\[\s*([\d.]+)s\] stalled: (no step for (\d+) s.*)", text)
    if not said:
        return [key, case.name, "–", "no stall told", "–", "–", "–", "MISSED"]
    line = said.group(2)
    seconds = float(said.group(3))
    named = "phases_loop.py:" in line and "lock.acquire(" in line
    verdict = "met" if seconds <= 60 and named else "MISSED"
    where = line.split(": ", 1)[-1]  # where the rank that stalled first waits
    return [key, case.name, "–", f"stalled after {seconds:.0f} s without a step", where, "–", "–", verdict]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--case", action="append", choices=sorted(CASES), help="a case (default: the CPU ones)")
    p.add_argument("--out", type=Path, help="also write the table here (Markdown)")
    p.add_argument("--keep", type=Path, help="copy each case's recording (CSV and JSON) into this folder")
    args = p.parse_args()
    keys = args.case or [k for k in CASES if k.startswith("cpu")]
    import torch

    device = (
        torch.cuda.get_device_name(0)
        if torch.cuda.is_available()
        else f"CPU ({platform.processor() or 'x86_64'}, {os.cpu_count()} cores)"
    )
    lines = [
        f"{device}, torch {torch.__version__}, {dt.date.today().isoformat()}",
        "",
        "| case | what | its own steps/s | gpudash steps/s [95% CI] | ratio, ± "
        "| its goodput | gpudash goodput | verdict |",
        "|---|---|---|---|---|---|---|---|",
    ]
    with tempfile.TemporaryDirectory(prefix="job-phases-") as scratch:
        for key in keys:
            row = run_case(key, CASES[key], Path(scratch))
            lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |")
            if args.keep:
                args.keep.mkdir(parents=True, exist_ok=True)
                for kept in Path(scratch).glob(f"{key}.*"):
                    shutil.copy(kept, args.keep / kept.name)
            print(lines[-1], flush=True)
    table = "\n".join(lines)
    print("\n" + table)
    if args.out:
        args.out.write_text(table + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
