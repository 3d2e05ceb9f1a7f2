"""A diagnosis stands on the training step's own evidence (issue 89): a step after one of the job's
phases (an evaluation, a checkpoint, a compile, a pause) is left out of the timed window, its syncs
are left out of the table of sync sites, a profiler window that a rare phase fell into is taken
again, and the verdict says over how many training steps it stands."""

from __future__ import annotations

import json
import sys

import pytest

from gpudash.boot.gpudash_boot.sync_sites import StepSites
from gpudash.boot.gpudash_boot.sync_table import Site
from gpudash.boot.gpudash_boot.wire import PHASE_S, RECORD_FIELDS
from gpudash.job.diagnosis_window import MAX_RETAKES, SETTLE_STEPS, JobDiagnosis, ran_evidence
from gpudash.job.step_record import StepRecord
from tests.test_job import JOBS, gpudash, job_line

STEP_S = 0.010
EVAL_S = 0.400


def _record(step: int, t: float, *, syncs: int = 1, phase_s: float = 0.0, profiled: bool = False) -> StepRecord:
    """A step of STEP_S of training, after ``phase_s`` of one of the job's phases (its syncs with it)."""
    return StepRecord(step, t, STEP_S * 1e3, 32, 0, 0.0, syncs, profiled, train_s=STEP_S, phase_s=phase_s)


def _steps(d: JobDiagnosis, count: int, start: int, t: float, every: int = 0) -> tuple[int, float]:
    """``count`` steps into ``d``, an evaluation of 400 .item() syncs before every ``every``-th (0: none)."""
    for step in range(start, start + count):
        evaluating = every and step % every == 0
        t += STEP_S + (EVAL_S if evaluating else 0.0)
        d.add(_record(step, t, syncs=401 if evaluating else 1, phase_s=EVAL_S if evaluating else 0.0), now=t)
    return start + count, t


def test_the_timed_window_leaves_out_the_steps_after_an_evaluation_and_says_over_how_many_it_stands() -> None:
    d = JobDiagnosis(steps=20, asked_at=0.0)
    step, t = _steps(d, 2 * SETTLE_STEPS, 1, 0.0)
    assert d.phase == "timed"
    _steps(d, 40, step, t, every=8)
    assert d.phase == "traced" and d.timed_evidence is not None
    evidence = d.timed_evidence
    assert evidence.steps == 20 and d.left_out == 3  # steps 24, 32 and 40 came after an evaluation
    assert evidence.syncs_per_step == 1.0  # with them: 1 + 1200/23, the evaluation's .item()s counted as the step's
    assert evidence.step_ms == pytest.approx(STEP_S * 1e3)
    assert d.over() == "over 20 training steps; 3 after an evaluation, a checkpoint, a compile or a pause left out"


def test_a_run_that_ended_before_its_window_is_judged_on_its_training_steps_alone() -> None:
    records = [
        _record(i, i * 0.5, syncs=401 if i % 10 == 0 else 1, phase_s=0.4 if i % 10 == 0 else 0.0) for i in range(80)
    ]
    evidence = ran_evidence(records, steps=30)
    assert not isinstance(evidence, str)
    assert evidence.syncs_per_step == 1.0 and evidence.steps == 54  # 60 after the warm-up, 6 after an evaluation


def test_a_profiler_window_a_rare_phase_fell_into_is_taken_again_and_a_frequent_ones_is_said() -> None:
    rare = JobDiagnosis(steps=20, asked_at=0.0)
    step, t = _steps(rare, 2 * SETTLE_STEPS + 21, 1, 0.0)
    assert rare.phase == "traced" and rare.left_out == 0
    for _ in range(MAX_RETAKES):
        rare.add(_record(step, t + 1.0, phase_s=EVAL_S, profiled=True), now=t + 1.0)
        assert rare.retake()
    assert (
        rare.over()
        == f"over 20 training steps; the profiler window taken {MAX_RETAKES + 1} times, the job's phases out of it"
    )
    rare.add(_record(step, t + 2.0, phase_s=EVAL_S, profiled=True), now=t + 2.0)
    assert not rare.retake()  # taken as it is after MAX_RETAKES, and said
    assert rare.over().endswith(
        f"; the profiler window taken {MAX_RETAKES + 1} times, the last with one of those in it"
    )

    frequent = JobDiagnosis(steps=20, asked_at=0.0)
    step, t = _steps(frequent, 2 * SETTLE_STEPS, 1, 0.0)
    _steps(frequent, 40, step, t, every=8)
    frequent.add(_record(99, t + 9.0, phase_s=EVAL_S, profiled=True), now=t + 9.0)
    assert not frequent.retake()  # another window would have one too
    assert "; the profiler window has one of those in it" in frequent.over()

    untouched = JobDiagnosis(steps=20, asked_at=0.0)
    _steps(untouched, 2 * SETTLE_STEPS + 21, 1, 0.0)
    untouched.add(_record(99, 99.0, profiled=True), now=99.0)  # gpudash's own profiling is no phase of the job's
    assert not untouched.retake() and untouched.over() == "over 20 training steps"


def test_an_evaluations_syncs_are_not_the_steps_in_the_table_of_sync_sites() -> None:
    train, evaluate = Site("train.py", 88, "main"), Site("train.py", 225, "estimate_loss")
    sites = StepSites()
    for step in range(12):
        if step % 4 == 3:  # an evaluation before this step: 200 .item()s
            for _ in range(200):
                sites.add_site(evaluate)
        sites.add_site(train)
        sites.step_ended(own=step % 4 != 3)
    table = sites.table()
    assert table.steps == 9 and table.per_step == 1.0
    assert [(r.site, r.count) for r in table.rows] == [(train, 9)]


def test_a_step_record_carries_the_seconds_of_the_jobs_phases_before_it() -> None:
    raw = [5, 10.0, 12.5, 32, 0, 0.001, 3, 0, 0.0125, 0.0, 0.0, None, 4096, 0.75, 0]
    assert len(raw) == len(RECORD_FIELDS) and RECORD_FIELDS[PHASE_S] == "phase_s"
    record = StepRecord.parse(raw)
    assert record is not None and record.phase_s == 0.75 and record.after_phase
    older = StepRecord.parse(raw[:PHASE_S])  # hooks from before the field: no phase said
    assert older is not None and older.phase_s == 0.0 and not older.after_phase


@pytest.mark.slow
def test_diagnose_of_a_job_with_evaluations_and_checkpoints_judges_its_training_steps() -> None:
    """An evaluation every 9 steps and a checkpoint every 13, each 0.2 s against a step of 20 ms:
    the verdict's step is the training's own, and it says how many steps it left out."""
    job: tuple[str, ...] = (
        "--steps",
        "400",
        "--step-s",
        "0.02",
        "--eval-every",
        "9",
        "--eval-batches",
        "2",
        "--eval-batch-s",
        "0.1",
    )
    job += ("--save-every", "13", "--save-s", "0.2", "--say-when-stopped")
    done = gpudash(
        "diagnose", "--json", "--no-check", "--warmup", "1", "--", sys.executable, str(JOBS / "phases_loop.py"), *job
    )
    assert done.returncode == 0, done.stderr[-2000:]
    document = json.loads(done.stdout[done.stdout.index("{") :])
    evidence = document["evidence"]
    own = job_line(done.stdout + done.stderr)
    own_ms = 1e3 * float(own["train_s"]) / int(own["steps"])  # the job's own step, its phases left out
    assert abs(evidence["step_ms"] - own_ms) < 0.25 * own_ms, (evidence, own)
    over = document["over"]
    assert over.startswith(f"over {evidence['steps']} training steps; ")
    left_out = int(over.split("; ")[1].split()[0])
    assert 1 <= left_out and "after an evaluation, a checkpoint, a compile or a pause left out" in over
