"""Every case tagged ``tiny`` does its tiny run here, as CI can (``python -m benchmarks run CASE
--tiny``): a case whose measuring code rotted fails on a machine without a GPU, not at its next
real run. Each writes its result, and the JSON read back holds its case, its stamp and what the
line below says it printed. A case's tiny run is made once a session (``tiny_run``): a test of
its own case (tests/test_aa.py) reads the same run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import pytest

from tests.helpers import needs_two_cpus, once_per_session

ROOT = Path(__file__).resolve().parents[1]
PRINTS = {  # a tiny case: a line its Markdown must hold
    "aa_false_claims": "of 1 A/A runs",
    "engine_loop_cost": "| tree | µs/step (median) |",
    "engine_overhead": "engine saw:",
    "gpm_cost": "| whole NVML tick, GPM off |",
    "host_call_cost": "| tracker.step() |",
    "job_hook_cost": "| gpudash's hooks (at the job's pace) |",
    "job_overhead": "| small | 1 |",
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


KEEPS = {"aa_false_claims": "keep"}  # a case that keeps its runs' files where its parameter says: in its folder


class TinyRun(NamedTuple):
    """A case's tiny run: its folder (``--out``, and ``keep``'s where the case has one), its exit
    status and output, and what ``python -m benchmarks show`` printed of its kept result."""

    out: Path
    code: int
    stdout: str
    stderr: str
    shown: str


def tiny_run(case: str, factory: pytest.TempPathFactory) -> TinyRun:
    """``python -m benchmarks run CASE --tiny`` and ``show`` of its result, once a session."""

    def run() -> TinyRun:
        out = factory.mktemp(f"tiny-{case}")
        keep = ["-p", f"{KEEPS[case]}={out}"] if case in KEEPS else []
        done = subprocess.run(
            [sys.executable, "-m", "benchmarks", "run", case, "--tiny", *keep, "--out", str(out), "-q"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=240,
            env={**os.environ, "OMP_NUM_THREADS": "1"},
        )
        shown = ""
        if done.returncode == 0:
            shown = subprocess.run(
                [sys.executable, "-m", "benchmarks", "show", str(out / f"{case}.result.json")],
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=120,
            ).stdout
        return TinyRun(out, done.returncode, done.stdout, done.stderr, shown)

    return once_per_session(factory, f"test_benchmarks_tiny-{case}", run)


@pytest.mark.slow
@pytest.mark.parametrize(
    "case", [pytest.param(c, marks=needs_two_cpus) if c == "rank_host_cost" else c for c in sorted(PRINTS)]
)
def test_a_tiny_case_runs_on_the_cpu_and_keeps_its_result(case: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    done = tiny_run(case, tmp_path_factory)
    assert done.code == 0, done.stderr[-2000:]
    assert PRINTS[case] in done.stdout, done.stdout[-2000:]
    assert "Traceback" not in done.stderr
    kept = json.loads((done.out / f"{case}.result.json").read_text())
    assert kept["schema"] == 1 and kept["case"] == case
    assert kept["command"].startswith(f"python -m benchmarks run {case}")
    assert {"device", "torch", "python", "commit", "date", "host_load"} <= set(kept["stamp"])
    assert done.shown + "\n" == done.stdout, "the kept result shows as it printed"
