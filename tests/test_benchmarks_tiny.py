"""Every case tagged ``tiny`` does its tiny run here, as CI can (``python -m benchmarks run CASE
--tiny``): a case whose measuring code rotted fails on a machine without a GPU, not at its next
real run. Each writes its result, and the JSON read back holds its case, its stamp and what the
line below says it printed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import needs_two_cpus

ROOT = Path(__file__).resolve().parents[1]
PRINTS = {  # a tiny case: a line its Markdown must hold
    "aa_false_claims": "of 1 A/A runs",
    "engine_loop_cost": "| tree | µs/step (median) |",
    "engine_overhead": "engine saw:",
    "gpm_cost": "| whole NVML tick, GPM off |",
    "host_call_cost": "| tracker.step() |",
    "job_hook_cost": "| gpudash's hooks (at the job's pace) |",
    "job_overhead": "| small | 2 |",
    "mfu_check": "| MFU over 1 TFLOP/s |",
    "rank_host_cost": "largest rank PSS:",
    "replay_first_frame": "| 200 |",
    "sync_sites_walk": "naming the line adds",
    "track_overhead": "the last tracked file:",
    "tui_frame": "first frame, in process",
    "tune_vs_sweep": "| encdec b8,32 time | 357 s | 113 s |",
}


def tiny_cases() -> list[str]:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks", "list", "--tag", "tiny", "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return sorted(c["name"] for c in json.loads(done.stdout))


def test_every_tiny_case_says_what_its_run_must_print() -> None:
    assert tiny_cases() == sorted(PRINTS)


@pytest.mark.slow
@pytest.mark.parametrize(
    "case", [pytest.param(c, marks=needs_two_cpus) if c == "rank_host_cost" else c for c in sorted(PRINTS)]
)
def test_a_tiny_case_runs_on_the_cpu_and_keeps_its_result(case: str, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks", "run", case, "--tiny", "--out", str(tmp_path), "-q"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert PRINTS[case] in done.stdout, done.stdout[-2000:]
    assert "Traceback" not in done.stderr
    kept = json.loads((tmp_path / f"{case}.result.json").read_text())
    assert kept["schema"] == 1 and kept["case"] == case
    assert kept["command"].startswith(f"python -m benchmarks run {case}")
    assert {"device", "torch", "python", "commit", "date", "host_load"} <= set(kept["stamp"])
    shown = subprocess.run(
        [sys.executable, "-m", "benchmarks", "show", str(tmp_path / f"{case}.result.json")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shown.stdout + "\n" == done.stdout, "the kept result shows as it printed"
