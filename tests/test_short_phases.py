"""An evaluation or a save between steps that is short but longer than a median step is not
training (a robustness sweep of user scripts: 25–45 ms evaluations every 50 steps of about 5 ms were
counted in the steps, the rate 11–17% under the script's own). The hooks' span keeper on a clock the
test moves (no sleep a loaded machine stretches), the session's tally of a short span, and a real
script through the real command."""

from __future__ import annotations

import json
import re
import sys
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from gpudash.boot.gpudash_boot import phases as phases_part
from gpudash.core.protocol import CHECKPOINT, EVALUATION, TRAINING
from gpudash.job.phase_watch import PhaseWatch
from gpudash.job.step_record import StepRecord
from gpudash.job.steps import JobSamples
from tests import printed
from tests.test_job import JOBS, gpudash, job_line

STEP_S = 0.005


def _keeper(monkeypatch: pytest.MonkeyPatch, steps: int) -> tuple[Any, list[dict[str, Any]], list[float]]:
    """The keeper after ``steps`` training steps of ``STEP_S`` (a training loader's batch each), its
    messages, and its clock."""
    clock = [1000.0]
    monkeypatch.setattr(phases_part, "time", SimpleNamespace(monotonic=lambda: clock[0]))
    said: list[dict[str, Any]] = []
    keeper = phases_part.Phases(said.append, lambda: 0)
    keeper.thread = threading.get_ident()
    keeper.batch(1, clock[0], clock[0], False)
    keeper.at_step(clock[0], 1)
    for _ in range(steps):
        _train(keeper, clock)
    return keeper, said, clock


def _train(keeper: Any, clock: list[float]) -> float | None:
    """One training step of ``STEP_S``: its batch, then its end; its training seconds."""
    keeper.batch(1, clock[0], clock[0], False)
    clock[0] += STEP_S
    return keeper.at_step(clock[0], 1)


def _evaluate(keeper: Any, clock: list[float], batches: int, batch_s: float) -> None:
    """An evaluation loop over a second loader after a step's end."""
    for _ in range(batches):
        keeper.batch(2, clock[0], clock[0] + batch_s, False)
        clock[0] += batch_s
    keeper.batch(2, clock[0], clock[0], True)


def test_an_evaluation_of_a_few_steps_is_left_out_of_the_step_and_told_quietly(monkeypatch: pytest.MonkeyPatch) -> None:
    keeper, said, clock = _keeper(monkeypatch, 5)
    _evaluate(keeper, clock, 4, 0.01)  # 40 ms: eight median steps, under the 50 ms said on a line
    assert _train(keeper, clock) == pytest.approx(STEP_S)
    (told,) = [m for m in said if m.get("kind") == EVALUATION]
    assert told["s"] == pytest.approx(0.04) and told["quiet"] is True


def test_an_evaluation_shorter_than_a_median_step_or_before_three_steps_is_the_steps(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    keeper, said, clock = _keeper(monkeypatch, 5)
    _evaluate(keeper, clock, 2, 0.001)  # 2 ms: under a median step
    assert _train(keeper, clock) == pytest.approx(STEP_S + 0.002)
    early, early_said, early_clock = _keeper(monkeypatch, 1)  # one step's training seconds known: not yet
    _evaluate(early, early_clock, 4, 0.01)
    assert _train(early, early_clock) == pytest.approx(STEP_S + 0.04)
    assert not [m for m in said + early_said if m.get("kind") == EVALUATION]


def test_a_save_of_two_steps_is_a_checkpoint_told_quietly_and_one_of_50_ms_is_said(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    keeper, said, clock = _keeper(monkeypatch, 5)
    for seconds in (0.01, 0.06):
        keeper.begin(CHECKPOINT)  # torch.save, after a step's end
        clock[0] += seconds
        keeper.end(CHECKPOINT)
        assert _train(keeper, clock) == pytest.approx(STEP_S)
    quick, long_ = [m for m in said if m.get("kind") == CHECKPOINT]
    assert quick["s"] == pytest.approx(0.01) and quick["quiet"] is True
    assert long_["s"] == pytest.approx(0.06) and "quiet" not in long_


def test_a_quiet_span_is_counted_in_the_phases_and_not_said() -> None:
    emitted: list[dict[str, Any]] = []
    watch = PhaseWatch(0.0, JobSamples("job:x.py", "", 0.25, 0.0), None, lambda *_, **kw: emitted.append(kw))  # type: ignore[arg-type]
    watch.step(StepRecord(1, 1.0, None, 0, 0, 0.0, None, False, None))
    watch.step(StepRecord(2, 1.005, None, 0, 0, 0.0, None, False, 0.005))
    watch.on_message("phase", {"kind": EVALUATION, "t0": 1.005, "t1": 1.045, "s": 0.04, "quiet": True}, lead=True)
    watch.step(StepRecord(3, 1.05, None, 0, 0, 0.04, None, False, 0.005))
    totals = watch.phases.totals(1.05)
    assert totals[EVALUATION] == pytest.approx(0.04) and totals[TRAINING] == pytest.approx(0.01)
    assert not [e for e in emitted if e.get("what") == EVALUATION]  # no line, no event of its own


@pytest.mark.slow
def test_a_scripts_short_evaluations_and_saves_are_its_phases_and_its_rate_is_its_trainings(tmp_path: Path) -> None:
    """``phases_loop.py``: steps of 10 ms, a 40 ms evaluation and a 30 ms save every 10 steps (each over
    twice a step however a loaded machine stretches the steps' own work)."""
    out = tmp_path / "short.csv"
    evaluations = ("--eval-every", "10", "--eval-batches", "4", "--eval-batch-s", "0.01")
    saves = ("--save-every", "10", "--save-s", "0.03")
    job = (sys.executable, str(JOBS / "phases_loop.py"), "--steps", "150", "--step-s", "0.01", *evaluations, *saves)
    done = gpudash("record", str(out), "--", *job, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    own = job_line(done.stdout)
    meta = json.loads(out.with_suffix(".json").read_text())
    assert meta["phases"][EVALUATION] == pytest.approx(float(own["eval_s"]), rel=0.25)
    assert meta["phases"][CHECKPOINT] == pytest.approx(float(own["ckpt_s"]), rel=0.5)
    (summary,) = printed.summaries(done.stderr)
    mean, low, high = summary.figure.mean, summary.figure.low, summary.figure.high
    assert mean is not None, summary
    low, high = (mean, mean) if low is None or high is None else (low, high)  # (too few windows: its mean)
    # the job's own rate (its steps' seconds alone) within gpudash's interval, or 10% of it
    assert low * 0.9 <= float(own["steps_per_s"]) <= high * 1.1, (summary, own)
    said = re.findall(r"phase: evaluation ([\d.]+) (ms|s)\b", done.stderr)
    assert all(unit == "s" or float(n) >= 50 for n, unit in said)  # a short one is counted, not said
