"""A step is a step however the job takes it (issue 73): a job without ``torch.optim`` — its
parameters updated by hand after each backward pass, either way a script writes it — is recorded at
its own rate; its own ``gpudash.track()`` steps count; a job with none of these is told how to mark
them; an LBFGS step is one step whatever its closure's evaluations, and the FLOP count over it stays
within twice a step's time; a Ctrl-C inside ``loss.backward()`` reads as it does bare.

The jobs (``tests/data/jobs/hand_sgd.py``, ``lbfgs_closure.py``) are written as users write them;
each prints its own count and rate, which gpudash's figures are held to."""

from __future__ import annotations

import csv
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests import printed
from tests.helpers import ctrl_c_reaches_it, once_per_session
from tests.test_job import JOBS, gpudash

HAND = str(JOBS / "hand_sgd.py")
LBFGS = str(JOBS / "lbfgs_closure.py")
SIZES = ("--hidden", "2048", "--batch", "256")  # a few ms a step: the hooks' own cost is small beside it
OWN_RATE = re.compile(r"^hand_sgd: (\d+) steps in [\d.]+ s: ([\d.]+) steps/s$", re.M)
BY_HAND = "steps: backward passes (no torch.optim: the parameters updated by hand)"
ONE_THREAD = {"OMP_NUM_THREADS": "1"}  # as under xdist (conftest): two threads a job on a loaded 2-core machine crawl


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _said(path: Path, what: str) -> list[str]:
    """The messages of the recording's "measured" events of ``what``."""
    return [r["event_message"] for r in _rows(path) if r["event_kind"] == "measured" and r["event_what"] == what]


def _record(folder: Path, name: str, *job: str) -> tuple[Path, subprocess.CompletedProcess[str]]:
    out = folder / f"{name}.csv"
    done = gpudash("record", str(out), "-q", "--", sys.executable, *job, env=ONE_THREAD)
    assert done.returncode == 0, done.stderr[-2000:]
    return out, done


@pytest.fixture(scope="module")
def by_hand(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The hand-updated job recorded once each way it updates: ``p.data.add_`` and, under
    ``torch.no_grad()``, ``p.sub_`` (300 iterations of about 5 ms): each one's CSV, run.json and stdout."""

    def record() -> dict[str, Any]:
        folder = tmp_path_factory.mktemp("by-hand")
        runs = {}
        for name, more in (("data", ()), ("no_grad", ("--no-grad",))):
            out, done = _record(folder, name, HAND, *SIZES, "--steps", "300", *more)
            runs[name] = (out, json.loads(out.with_suffix(".json").read_text()), done.stdout)
        return runs

    return once_per_session(tmp_path_factory, "test_job_steps-by-hand", record)


@pytest.mark.slow
@pytest.mark.parametrize("how", ["data", "no_grad"])
def test_a_job_that_updates_its_parameters_by_hand_is_recorded_at_its_own_rate(
    by_hand: dict[str, Any], how: str
) -> None:
    out, meta, stdout = by_hand[how]
    own = OWN_RATE.search(stdout)
    assert own is not None, stdout
    (summary,) = [r for r in _rows(out) if r["row_kind"] == "summary"]
    rate = float(summary["steps_per_s"])
    assert summary["ci_low"] and float(summary["ci_low"]) < rate < float(summary["ci_high"])
    # its own figure (over all its steps, warm-up and all) within gpudash's interval, give or take 5%: a
    # loaded machine widens the interval, a miscount (two steps an iteration, or half) falls far outside it
    low, high = 0.95 * float(summary["ci_low"]), 1.05 * float(summary["ci_high"])
    assert low <= float(own[2]) <= high, (own[2], summary["ci_low"], summary["ci_high"])
    line = printed.summary(summary["event_message"])  # the summary says how its steps were counted
    assert line is not None and BY_HAND in line.others, summary["event_message"]
    samples = [r for r in _rows(out) if r["row_kind"] == "sample"]
    assert int(samples[-1]["steps"]) == int(own[1]) - 1  # each iteration ends at the next one's backward pass
    assert _said(out, "steps") == [BY_HAND]
    assert meta["started"]["steps"] == BY_HAND.removeprefix("steps: ") and meta["started"]["optimizer"] == ""
    memory = meta["memory"]
    assert memory["params_bytes"] > 0 and memory["grads_bytes"] == memory["params_bytes"]  # counted once filled


@pytest.mark.slow
def test_its_own_gpudash_track_steps_count_and_a_job_with_no_step_is_told_how_to_mark_them(tmp_path: Path) -> None:
    own = tmp_path / "own.csv"
    job = (HAND, "--hidden", "256", "--batch", "64", "--steps", "100", "--no-update")
    out, done = _record(tmp_path, "tracked", *job, "--track", str(own))
    samples = [r for r in _rows(out) if r["row_kind"] == "sample"]
    assert int(samples[-1]["steps"]) == 100 and samples[-1]["batch_size"] == "64"  # track()'s samples, its steps
    assert _said(out, "steps") == ["steps: gpudash.track()"] and own.exists()  # and the job's own recording
    bare = gpudash("record", str(tmp_path / "none.csv"), "--", sys.executable, *job, env=ONE_THREAD)
    assert bare.returncode == 0 and not (tmp_path / "none.csv").exists()
    assert bare.stderr.strip().splitlines()[-1] == (
        "gpudash: the job exited with code 0 before its first step: nothing recorded (no torch.optim step, no "
        "backward pass followed by its parameters changing, no gpudash.track() step): to mark its steps, call "
        "tracker.step() after each, with tracker = gpudash.track('steps.csv') made before its loop (docs/track.md)"
    )


# -- LBFGS: one step whatever its closure's evaluations; the one-off measurements bounded --------------
@pytest.mark.slow
def test_an_lbfgs_step_is_one_step_and_the_flop_count_over_it_stays_within_twice_a_step(tmp_path: Path) -> None:
    out, done = _record(tmp_path, "lbfgs", LBFGS, "--waves", "16", "--length", "100", "--steps", "6")
    took = [float(t) for t in re.findall(r"^step \d+ loss \S+ took ([\d.]+) s$", done.stdout, re.M)]
    assert len(took) == 6
    samples = [r for r in _rows(out) if r["row_kind"] == "sample"]
    assert int(samples[-1]["steps"]) == 6  # not its closure's 20 backward passes a step
    assert _said(out, "steps") == ["steps: optimizer steps"]
    (flops,) = _said(out, "flops")
    assert "the optimizer evaluated its closure" in flops and "times in the counted step (LBFGS)" in flops
    counted = re.search(r"the count cost the job [\d.e+-]+ s \(its step (\d+) took", flops)
    assert counted is not None, flops
    step = int(counted[1]) - 1  # the job's own numbering starts at 0
    # the count gives up past twice the latest untraced step, which load moves: bounded by the largest
    # of them (the memory's step 3 left out too); unbounded, 20 evaluations under the counter take far longer
    untraced = max(t for i, t in enumerate(took) if i not in (0, 2, step))
    assert took[step] <= 2 * untraced, (flops, took)
    memory = _said(out, "memory")
    assert memory and all("activations: saved for backward in step 3" in m for m in memory)  # its closure's first
    assert took[2] <= 2 * untraced, took


# -- Ctrl-C inside backward(): the job's traceback and exit status as bare -------------------------------
@pytest.mark.slow
def test_a_ctrl_c_inside_backward_leaves_the_jobs_traceback_and_exit_status_as_bare(tmp_path: Path) -> None:
    job = [sys.executable, HAND, "--steps", "20", "--interrupt-at", "5"]  # its steps counted by hand by then
    env = {**os.environ, **ONE_THREAD}
    bare = subprocess.run(job, capture_output=True, text=True, timeout=120, env=env, preexec_fn=ctrl_c_reaches_it)
    assert bare.returncode == -signal.SIGINT and bare.stderr.startswith("Traceback (most recent call last):")
    out = tmp_path / "r.csv"
    under = gpudash("record", str(out), "-q", "--", *job, env=ONE_THREAD)
    assert under.returncode == 128 + signal.SIGINT  # as a shell says the bare job's end
    said_by_job = "".join(line for line in under.stderr.splitlines(keepends=True) if not line.startswith("gpudash:"))
    assert said_by_job == bare.stderr  # byte for byte: no frame of gpudash's
    assert _said(out, "steps") == [BY_HAND]
