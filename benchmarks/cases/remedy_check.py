"""Is a remedy's "up to N×" an honest upper bound? Issue 56's sync script, measured.

``gpudash diagnose --json -- python tests/data/jobs/cuda_syncs.py`` gives the verdict, the syncs
remedy's ``up_to`` and the limit it names next. Then the script and its twin without the syncs
(``--no-syncs``: the loss summed on the GPU, read once) run bare, in pairs in a shuffled order,
each timing its own steps after a warm-up: what removing the syncs is really worth, read by pairs.
The goals: the estimate not below the measured gain (met unless the gain's interval lies wholly
above it: an upper bound), at most 1.5× (issue 56), and at most twice the measured gain."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass

from benchmarks.cases.shared.gpudash_outputs import run_gpudash
from benchmarks.harness.case import Unavailable
from benchmarks.harness.context import Run
from benchmarks.harness.params import param
from benchmarks.harness.schedule import Schedule, rounds
from benchmarks.harness.stamp import ROOT
from benchmarks.harness.stats import ratio, ratio_text

SCRIPT = ROOT / "tests" / "data" / "jobs" / "cuda_syncs.py"


@dataclass(frozen=True)
class Params:
    pairs: int = param(5, "pairs of bare runs, with the syncs and without")
    steps: int = param(3000, "steps a run")


def rate(extra: list[str], steps: int) -> float:
    """One bare run's own steps/s."""
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(steps), "--timed", *extra], capture_output=True, text=True, check=True
    )
    line = next(x for x in done.stdout.splitlines() if x.startswith("JOB "))
    return float(line.split("steps_per_s=")[1])


def measure(run: Run, p: Params) -> None:
    import torch

    if not torch.cuda.is_available():
        raise Unavailable("needs CUDA")
    done = run_gpudash("diagnose", "--json", "-q", "--warmup", "2", "--", sys.executable, str(SCRIPT), "100000000")
    verdict = json.loads(done.stdout)
    syncs = next((r for r in verdict["remedies"] if r["limit"] == "syncs"), None)
    arms = {"with syncs": lambda: rate([], p.steps), "without": lambda: rate(["--no-syncs"], p.steps)}
    got = rounds(arms, p.pairs, Schedule.PAIRS, seed=1)
    run.values("with syncs", got["with syncs"], "steps/s")
    run.values("without", got["without"], "steps/s")
    gain = run.keep("without/with syncs", ratio("without/with syncs", got["with syncs"], got["without"]))
    run.line(f"verdict: {verdict['bound']}: {verdict['why']}")
    run.line()
    table = run.table(
        [
            "remedy",
            "estimate (up to)",
            "then",
            "measured bare (no syncs / syncs)",
            "upper bound",
            "≤ 1.5×",
            "≤ 2× the gain",
        ],
        ["---", "--:", "---", "--:", "---", "---", "---"],
    )
    measured = f"{ratio_text(gain)} {gain.verdict}"
    if syncs is None:
        run.row(table, "syncs", "not named (under 1.05×)", "–", measured, "–", "–", "–")
    else:
        up = float(syncs["up_to"])
        # an upper bound unless the measured gain's interval lies above it
        bound = "not decided" if gain.low is None else "met" if up >= gain.low else "**not met**"
        at_most = "met" if up <= 1.5 else "**not met**"
        twice = "met" if gain.value is not None and up <= 2 * gain.value else "**not met**"
        run.row(table, "syncs", f"{up:.3g}×", syncs["then"] or "–", measured, bound, at_most, twice)
    run.line()
    pairs = run.table(["pair", "with syncs steps/s", "without steps/s", "ratio"], ["--:", "--:", "--:", "--:"])
    for i, (a, b) in enumerate(zip(got["with syncs"], got["without"], strict=True), 1):
        run.row(pairs, i, f"{a:.1f}", f"{b:.1f}", f"{b / a:.4f}")
