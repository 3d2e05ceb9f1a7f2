"""``gpudash -- CMD`` on a GPU: a job's step time from CUDA events, its syncs named by their lines,
a profiler window inside the job, and ``diagnose`` naming the lines that make it sync-bound."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

SCRIPT = Path(__file__).parent / "data" / "jobs" / "cuda_syncs.py"


def _line(marker: str) -> int:
    lines = SCRIPT.read_text().splitlines()
    return next(i for i, text in enumerate(lines, 1) if f"# SYNC: {marker}" in text)


def _gpudash(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpudash", *args], capture_output=True, text=True, timeout=300)


def test_a_cuda_jobs_steps_are_timed_and_its_syncs_named_by_line(tmp_path: Path) -> None:
    out = tmp_path / "r.csv"
    gpudash = ["record", str(out), "-q", "--duration", "6", "--trace-every", "1", "--trace-steps", "5"]
    done = _gpudash(*gpudash, "--", sys.executable, str(SCRIPT), "10000000")
    assert done.returncode == 0, done.stderr
    with open(out, newline="") as f:
        rows = list(csv.DictReader(f))
    timed = [r for r in rows if r["row_kind"] == "sample" and r["step_ms_p50"]]
    assert len(timed) > 4 and all(float(r["syncs_per_step"]) == pytest.approx(2.0, abs=0.05) for r in timed[1:-1])
    (table,) = json.loads(out.with_suffix(".json").read_text())["sync_sites"].values()
    lines = {(Path(s["site"]["file"]).name, s["site"]["line"]) for s in table["sites"] if "site" in s}
    assert lines == {("cuda_syncs.py", _line("bool")), ("cuda_syncs.py", _line("item"))}
    traces = [r for r in rows if r["event_kind"] == "measured" and r["event_what"] == "trace"]
    assert traces and Path(traces[0]["event_message"].rsplit("→ ", 1)[1]).is_file()


def test_diagnose_of_a_cuda_job_names_its_sync_lines(tmp_path: Path) -> None:
    done = _gpudash("diagnose", "--json", "--warmup", "2", "--", sys.executable, str(SCRIPT), "100000")
    assert done.returncode == 0, done.stderr
    verdict = json.loads(done.stdout)
    assert verdict["bound"] == "sync-bound", verdict
    assert f"cuda_syncs.py:{_line('item')}" in verdict["why"]
