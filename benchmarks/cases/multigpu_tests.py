"""The multi-GPU tests, run as a case so that their outcome is kept as a result beside the figures
they back (``pytest -m multigpu tests/test_ddp_multigpu.py tests/test_ddp.py``): pytest's output,
and its summary line."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass

from benchmarks.harness.context import Run
from benchmarks.harness.params import param
from benchmarks.harness.stamp import ROOT


@dataclass(frozen=True)
class Params:
    tests: tuple[str, ...] = param(("tests/test_ddp_multigpu.py", "tests/test_ddp.py"), "the test files")


def measure(run: Run, p: Params) -> None:
    argv = [sys.executable, "-m", "pytest", "-q", "-m", "multigpu", "-p", "no:cacheprovider", *p.tests]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    lines = done.stdout.strip().splitlines()
    run.line("```")
    for line in lines[-12:]:
        run.line(line)
    run.line("```")
    run.data["summary"] = lines[-1] if lines else ""
    if done.returncode not in (0, 5):  # 5: nothing collected (fewer than two GPUs: skipped)
        run.failed = f"pytest ended {done.returncode}"
