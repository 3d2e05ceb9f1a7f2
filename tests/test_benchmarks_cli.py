"""Every benchmark script answers ``--help``: a script whose imports or arguments rotted fails here,
on the CPU, even when its real run needs a GPU (its types are checked by mypy with the package's)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted(p.name for p in (ROOT / "benchmarks").glob("*.py") if p.name != "__init__.py")


def test_the_benchmarks_are_found() -> None:
    assert "diagnosis_cases.py" in SCRIPTS and "ddp_scaling.py" in SCRIPTS


@pytest.mark.parametrize("script", SCRIPTS)
def test_a_benchmark_answers_help(script: str) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("usage:"), done.stdout[:500]
    assert "Traceback" not in done.stderr
