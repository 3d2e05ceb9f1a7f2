"""The benchmark scripts that can run on the CPU do a tiny run here, as CI can: a script whose
measuring code rotted fails on a machine without a GPU, not at its next real run. (Those that need
CUDA answer ``--help`` in ``tests/test_benchmarks_cli.py``; ``aa_false_claims.py --tiny``,
``refusal_heap_growth.py``, the soaks and ``sync_sites_cost.py --walk`` have tests of their own.)"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TINY = {  # script: (its tiny arguments, a line its output must hold)
    "engine_overhead.py": (
        ["--device", "cpu", "-w", "sync_loss", "-v", "fixed", "-b", "4", "--seconds", "0.1", "--rounds", "1"],
        "engine saw:",
    ),
    "track_overhead.py": (
        ["--device", "cpu", "--rounds", "2", "--seconds", "0.2", "--warm", "0.1"],
        "the last tracked file:",
    ),
    "host_call_cost.py": (["--device", "cpu", "--blocks", "2"], "| tracker.step() |"),
    "tui_frame.py": (["--quick"], "whole frame:"),
    "engine_loop_cost.py": (["--rounds", "1", "--steps", "50"], "| "),
    "replay_first_frame.py": (["--quick", "--rows", "200"], "first frame"),
    "rank_host_cost.py": (["--device", "cpu", "--steps", "5", "--families", "sync_loss"], "PSS"),
    "job_overhead.py": (["--tiny"], "| small | 1 | samples/s |"),
    "job_hook_cost.py": (
        ["--device", "cpu", "--width", "32", "--batch", "32", "--blocks", "2", "--pairs", "5"],
        "| gpudash's hooks (at the job's pace) |",
    ),
    "mfu_check.py": (["--tiny"], "| MFU over 1 TFLOP/s |"),
}


PAGE = """
import sys
sys.path.insert(0, sys.argv[1])
from benchmarks.benchmarks_page import page
print(page(), end="")
"""


@pytest.mark.slow
@pytest.mark.parametrize("script", sorted(TINY))
def test_a_cpu_benchmark_does_a_tiny_run(script: str) -> None:
    args, expected = TINY[script]
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert expected in done.stdout, done.stdout[-2000:]
    assert "Traceback" not in done.stderr


def test_the_benchmarks_page_is_what_its_script_writes_from_the_published_results() -> None:
    """docs/BENCHMARKS.md is generated (``benchmarks/benchmarks_page.py``): a result published
    in docs/bench/ without the page written again, or a page edited by hand, fails here."""
    done = subprocess.run([sys.executable, "-c", PAGE, str(ROOT)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout == (ROOT / "docs" / "BENCHMARKS.md").read_text(), "run: python benchmarks/benchmarks_page.py"
