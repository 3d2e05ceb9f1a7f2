"""A job's figures are its training's (``gpudash -- CMD``): steps measured as steps, its wall time by
phase (start-up, evaluation, checkpoints, stalls, teardown) with goodput (the line a hung job waits
on: tests/test_job_stalls.py). The parts alone (the hooks' span keeping, the session's tally), then
real scripts through the real command on the CPU (``tests/data/jobs/phases_loop.py`` and its
Lightning and Hugging Face kin), read back by ``report`` and ``replay``."""

from __future__ import annotations

import csv
import json
import re
import shutil
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from gpudash.boot.gpudash_boot import phases as phases_part
from gpudash.core.protocol import CHECKPOINT, EVALUATION, OTHER, STARTUP, TEARDOWN, TRAINING, Event, EventKind
from gpudash.job.wall_time import JobPhases
from tests import printed
from tests.helpers import once_per_session
from tests.test_job import JOBS, gpudash, job_line

PHASES_LOOP = str(JOBS / "phases_loop.py")
BENCH_JOBS = Path(__file__).parents[1] / "benchmarks" / "jobs"


# -- the hooks' spans, inside the job ---------------------------------------------------------------
def phases_module() -> Any:
    return phases_part


@pytest.fixture
def phases() -> tuple[Any, list[dict[str, Any]]]:
    """The hooks' span keeper on this thread (as after a first step), and what it says to gpudash."""
    said: list[dict[str, Any]] = []
    keeper = phases_module().Phases(said.append, lambda: 0)
    keeper.thread = threading.get_ident()
    return keeper, said


def ended_phases(said: list[dict[str, Any]]) -> dict[str, float]:
    return {m["kind"]: m["s"] for m in said if "s" in m}


def test_batches_of_another_loader_between_steps_are_an_evaluation_left_out_of_the_step(phases: Any) -> None:
    keeper, said = phases
    t = time.monotonic() - 100.0  # in the past: the keeper never closes a span after now
    keeper.batch(1, t, t + 0.01, False)
    assert keeper.at_step(t + 0.1, 1) is None  # the first step: its start is the job's start-up
    for i in range(3):  # the evaluation loop
        keeper.batch(2, t + 0.2 + 0.1 * i, t + 0.25 + 0.1 * i, False)
    keeper.batch(1, t + 0.5, t + 0.51, False)  # training again: its next batch
    assert keeper.at_step(t + 0.6, 1) == pytest.approx(0.2)  # 0.5 s since the last step, 0.3 s of it evaluation
    assert ended_phases(said) == {EVALUATION: pytest.approx(0.3)}


def test_one_batch_of_a_second_loader_a_step_and_a_new_epochs_iterator_are_training(phases: Any) -> None:
    keeper, said = phases
    t = time.monotonic() - 100.0
    keeper.batch(1, t, t, False)
    keeper.batch(2, t, t, False)
    keeper.at_step(t + 0.1, 2)
    for k in range(1, 4):  # two loaders a step (a GAN's, say): each hands one batch
        keeper.batch(1, t + k * 0.1, t + k * 0.1, False)
        keeper.batch(2, t + k * 0.1 + 0.01, t + k * 0.1 + 0.01, False)
        assert keeper.at_step(t + k * 0.1 + 0.1, 2) == pytest.approx(0.1)
    keeper.batch(2, t + 0.45, t + 0.45, True)  # the epoch ends ...
    for k in range(2):  # ... a new iterator hands two batches (accumulation) before the step
        keeper.batch(3, t + 0.46 + 0.01 * k, t + 0.47 + 0.01 * k, False)
    assert keeper.at_step(t + 0.5, 3) == pytest.approx(0.1)
    assert ended_phases(said) == {}


def test_a_model_in_eval_mode_is_an_evaluation_only_when_training_resumes_before_the_step(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    module, clock = phases_module(), [1000.0]  # the keeper's clock, moved by the test: no sleep a load stretches
    monkeypatch.setattr(module, "time", SimpleNamespace(monotonic=lambda: clock[0]))
    said: list[dict[str, Any]] = []
    keeper = module.Phases(said.append, lambda: 0)
    keeper.thread = threading.get_ident()
    keeper.at_step(clock[0], 0)
    keeper.mode(False)  # model.eval(); an evaluation without a DataLoader
    clock[0] += 0.1
    keeper.mode(True)  # model.train()
    clock[0] += 0.001
    train = keeper.at_step(clock[0], 0)
    assert train is not None and train < 0.05 and ended_phases(said)[EVALUATION] >= 0.09
    said.clear()
    keeper.mode(False)  # a teacher put in eval mode inside the step: the step is training
    clock[0] += 0.1
    train = keeper.at_step(clock[0], 0)
    assert train is not None and train >= 0.09 and ended_phases(said) == {}


def test_the_saves_between_two_steps_are_one_checkpoint_and_a_second_counts_once(phases: Any) -> None:
    keeper, said = phases
    t = time.monotonic() - 100.0
    keeper.at_step(t, 0)
    keeper.spans = [(EVALUATION, t + 0.2, t + 1.0), (CHECKPOINT, t + 0.5, t + 0.6), (CHECKPOINT, t + 0.7, t + 0.72)]
    assert keeper.at_step(t + 1.5, 0) == pytest.approx(0.7)  # 1.5 s, 0.8 s of them evaluation or checkpoint
    assert ended_phases(said) == {CHECKPOINT: pytest.approx(0.22), EVALUATION: pytest.approx(0.58)}


def test_the_spans_between_two_steps_are_said_in_the_order_they_began(phases: Any) -> None:
    """An evaluation, then a checkpoint: said (and recorded, shown) in that order, though a second
    they share counts as the checkpoint's."""
    keeper, said = phases
    t = time.monotonic() - 100.0
    keeper.at_step(t, 0)
    keeper.spans = [(CHECKPOINT, t + 0.5, t + 0.7), (EVALUATION, t + 0.1, t + 0.5)]
    keeper.at_step(t + 1.0, 0)
    assert [m["kind"] for m in said if "s" in m] == [EVALUATION, CHECKPOINT]


# -- the session's tally ----------------------------------------------------------------------------
def test_the_phases_add_up_to_the_wall_time_and_goodput_is_trainings_share() -> None:
    p = JobPhases(t0=0.0)
    p.step(5.0, None)  # the first step: 5 s of start-up
    for k in range(1, 11):
        p.step(5.0 + k, 1.0)  # ten 1 s steps
    p.end(EVALUATION, 3.0, until=18.0)  # after the last step: not its teardown
    p.ended_t = 20.0
    totals = p.totals(20.0)
    assert totals[STARTUP] == 5.0 and totals[TRAINING] == 10.0 and totals[EVALUATION] == 3.0
    assert totals[TEARDOWN] == 2.0 and sum(totals.values()) == pytest.approx(20.0) and totals[OTHER] == 0
    assert p.goodput_pct(20.0) == pytest.approx(50.0) and p.line(20.0).startswith("goodput 50.0% of 20.0 s")
    assert p.heavy(20.0) == ""  # evaluation 15%: under a quarter
    p.end(EVALUATION, 3.0)
    assert p.heavy(20.0).startswith("evaluation takes 30% of the wall time — evaluate less often")


# -- real scripts through gpudash record --------------------------------------------------------------
def csv_rows(path: Path, kind: str) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return [row for row in csv.DictReader(f) if row["row_kind"] == kind]


def summary_row(path: Path) -> tuple[float, float | None, float | None]:
    (row,) = csv_rows(path, "summary")
    low, high = (float(row[k]) if row[k] else None for k in ("ci_low", "ci_high"))
    return float(row["steps_per_s"]), low, high


def record_job(tmp_path: Path, name: str, *job: str, options: tuple[str, ...] = ()) -> tuple[Path, Any, dict[str, Any]]:
    out = tmp_path / f"{name}.csv"
    done = gpudash("record", str(out), *options, "--", sys.executable, *job)
    assert done.returncode == 0, done.stderr[-2000:]
    return out, done, json.loads(out.with_suffix(".json").read_text())


# evaluations, checkpoints, a slow start and a slow exit: one recording that record, report and replay read
PHASES_JOB = (
    *("--steps", "16", "--step-s", "0.15", "--start-s", "1", "--exit-s", "1"),
    *("--eval-every", "4", "--eval-batch-s", "0.08", "--save-every", "8", "--save-s", "0.4"),
)


@pytest.fixture(scope="module")
def phases_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any, dict[str, Any]]:
    """``phases_loop.py`` with ``PHASES_JOB`` recorded once (for every xdist worker): the CSV, the
    command's output, the sidecar. Its files are read only: a test that changes them copies them."""
    return once_per_session(
        tmp_path_factory,
        "job-phases-run",
        lambda: record_job(tmp_path_factory.mktemp("phases"), "run", PHASES_LOOP, *PHASES_JOB),
    )


@pytest.mark.slow
def test_evaluation_checkpoints_a_slow_start_and_exit_are_phases_and_the_rate_is_the_trainings(
    phases_run: tuple[Path, Any, dict[str, Any]],
) -> None:
    out, done, meta = phases_run
    own = job_line(done.stdout)
    mean, low, high = summary_row(out)
    assert mean == pytest.approx(float(own["steps_per_s"]), rel=0.05)  # not averaged with what is not training
    phases = meta["phases"]
    assert phases[EVALUATION] == pytest.approx(float(own["eval_s"]), rel=0.15)
    assert phases[CHECKPOINT] == pytest.approx(float(own["ckpt_s"]), rel=0.15)
    assert phases[TEARDOWN] >= 1.0 and phases[STARTUP] >= 1.0  # --exit-s 1, --start-s 1
    own_goodput = 100 * float(own["train_s"]) / meta["wall_s"]
    assert meta["goodput_pct"] == pytest.approx(own_goodput, abs=5.0)
    ended = {(r["event_what"], bool(r["event_after"])) for r in csv_rows(out, "event") if r["event_kind"] == "phase"}
    assert {(EVALUATION, True), (CHECKPOINT, True), (STARTUP, True), (TEARDOWN, True)} <= ended
    assert [g for e in printed.event_lines(done.stderr, "measured") if (g := printed.goodput(e.text))], done.stderr


@pytest.mark.slow
def test_report_and_replay_read_a_jobs_phases_and_goodput(
    tmp_path: Path, phases_run: tuple[Path, Any, dict[str, Any]]
) -> None:
    from gpudash.recording.replay import ReplaySource, read_all

    recorded, _, meta = phases_run
    out = tmp_path / recorded.name  # a copy: its sidecar goes below
    shutil.copy(recorded, out)
    shutil.copy(recorded.with_suffix(".json"), out.with_suffix(".json"))
    report_dir = tmp_path / "report"
    done = gpudash("report", str(out), "--out", str(report_dir), "--json")
    assert done.returncode == 0, done.stderr
    said = printed.goodputs(done.stderr)
    assert said and f"{said[0].pct:.1f}" == f"{meta['goodput_pct']:.1f}", done.stderr
    (run,) = json.loads(done.stdout)["runs"]
    assert run["goodput_pct"] == meta["goodput_pct"] and run["phases"][EVALUATION] > 0
    assert "### Wall time by phase" in (report_dir / "report.md").read_text()
    out.with_suffix(".json").unlink()  # without its sidecar: from the phase rows and the samples
    again = gpudash("report", str(out), "--out", str(tmp_path / "again"), "--json")
    (bare,) = json.loads(again.stdout)["runs"]
    assert bare["phases"][EVALUATION] == pytest.approx(meta["phases"][EVALUATION], rel=0.01)
    assert bare["goodput_pct"] == pytest.approx(meta["goodput_pct"], abs=5.0)
    replayed = [m for m in read_all(ReplaySource(out)) if isinstance(m, Event) and m.kind == EventKind.PHASE]
    assert {m.what for m in replayed} >= {STARTUP, EVALUATION, TEARDOWN}


@pytest.mark.slow
def test_steps_of_five_sample_windows_read_their_rate_with_an_interval_after_12_steps(tmp_path: Path) -> None:
    job = (PHASES_LOOP, "--steps", "13", "--step-s", "0.5")  # each step five 0.1 s windows long
    out, done, _ = record_job(tmp_path, "slow", *job, options=("--sample-interval", "0.1"))
    own = float(job_line(done.stdout)["steps_per_s"])
    mean, low, high = summary_row(out)
    assert mean == pytest.approx(own, rel=0.04)
    assert low is not None and high is not None and (high - low) / 2 / mean < 0.10
    under_way = [float(r["steps_per_s"]) for r in csv_rows(out, "sample") if 2 <= int(r["steps"]) < 13]  # steps 3–13
    reading = [rate for rate in under_way if rate > 0.5 * own]
    assert len(reading) >= 0.9 * len(under_way)  # a step under way reads its rate, not 0, 0, 0, 0, 2


@pytest.mark.slow
def test_without_a_dataloader_the_batch_and_samples_per_s_are_blank_and_eval_mode_is_an_evaluation(
    tmp_path: Path,
) -> None:
    job = ("--steps", "13", "--step-s", "0.15", "--no-loader", "--eval-every", "4", "--eval-mode-only")
    out, done, meta = record_job(tmp_path, "plain", PHASES_LOOP, *job)
    own = job_line(done.stdout)
    samples = csv_rows(out, "sample")
    assert samples and all(r["samples_per_s"] == "" and r["batch_size"] == "0" for r in samples)
    assert meta["phases"][EVALUATION] == pytest.approx(float(own["eval_s"]), rel=0.15)  # three passes, 6 × 0.1 s
    mean, _, _ = summary_row(out)
    assert mean == pytest.approx(float(own["steps_per_s"]), rel=0.05)


@pytest.mark.slow
def test_lightnings_validation_loop_is_an_evaluation_and_its_rate_its_training_steps(tmp_path: Path) -> None:
    """... and its steps are ``Trainer.fit``'s global steps, of its training loader's batch."""
    out, done, meta = record_job(tmp_path, "lightning", str(JOBS / "lightning_val.py"), "20")
    own = job_line(done.stdout)
    last = csv_rows(out, "sample")[-1]
    assert own["steps"] == "20" == last["steps"] and last["batch_size"] == "8"  # (trainer.global_step)
    mean, _, _ = summary_row(out)
    assert mean == pytest.approx(float(own["steps_per_s"]), rel=0.05)
    assert meta["phases"][EVALUATION] == pytest.approx(float(own["eval_s"]), rel=0.2)  # two passes of 6 × 0.1 s


@pytest.mark.slow
def test_a_hugging_face_trainer_with_evaluation_and_saves_reads_its_training_rate_and_goodput(tmp_path: Path) -> None:
    job = ("--tiny", "--steps", "40", "--eval-steps", "10", "--save-steps", "20", "--pace", "0.05")
    out, done, meta = record_job(tmp_path, "hf", str(BENCH_JOBS / "hf_phases.py"), *job)
    mean, low, high = summary_row(out)
    own = float(job_line(done.stdout)["steps_per_s"])
    # the script times its own steps but the first and those after an evaluation or a save; gpudash its
    # steps after its warm-up: two samples of a noisy rate (real compute, two loader workers). Its own figure
    # lies inside gpudash's interval, give or take a tenth (a loaded machine widens the interval, not the slack)
    assert low is not None and high is not None, out.read_text()[-2000:]
    assert low - 0.10 * own <= own <= high + 0.10 * own, (mean, low, high, own)
    assert meta["phases"][EVALUATION] > 0 and 0 < meta["goodput_pct"] < 100


@pytest.mark.slow
def test_diagnose_says_when_evaluation_takes_over_a_quarter_of_the_wall_time() -> None:
    # evaluation 0.8 s every 3 steps of 0.05 s (84% of a stretch of steps): 1 s of warm-up, then 20 steps to
    # settle and 31 timed (about 17 s, 14 s of them evaluation) make a share of the wall time over a quarter
    # even where a loaded machine takes 30 s to start the job (its start-up is wall time too: 14 of 47 s)
    job = ("--steps", "400", "--step-s", "0.05", "--eval-every", "3", "--eval-batches", "4", "--eval-batch-s", "0.2")
    done = gpudash(
        "diagnose", "--no-check", "--warmup", "1", "--", sys.executable, PHASES_LOOP, *job, "--say-when-stopped"
    )
    assert done.returncode == 0, done.stderr[-2000:]
    verdict = done.stdout.strip().splitlines()[-1]
    assert "evaluation takes" in verdict and "of the wall time — evaluate less often, or on fewer batches" in verdict
    shown = re.search(rf"({printed.NUMBER}) ms a step", verdict)  # (a figure as gpudash prints it: "1,020")
    assert shown is not None, verdict
    step_ms = printed.number(shown[1])
    own = job_line(done.stdout + done.stderr)  # the job's own figures, however loaded the machine
    own_ms, eval_ms = 1e3 / float(own["steps_per_s"]), 1e3 * float(own["eval_s"]) / int(own["steps"])
    assert 50.0 <= step_ms < own_ms + eval_ms / 2  # the step's own time, evaluation left out (with it: + eval_ms)


@pytest.mark.slow
def test_an_evaluation_before_the_run_has_started_is_recorded_and_said_after_its_start(tmp_path: Path) -> None:
    """Evaluations between the job's first steps, before gpudash's run has started (10 steps in):
    said after the recording's first lines, not before them, and recorded under the job's name
    (such a row had no workload, variant or batch)."""
    job = ("--steps", "24", "--step-s", "0.05", "--eval-every", "2", "--eval-batches", "3", "--eval-batch-s", "0.05")
    out, done, _ = record_job(tmp_path, "early", PHASES_LOOP, *job)
    lines = [line for line in done.stderr.splitlines() if line.startswith("gpudash:")]
    told = [i for i, line in enumerate(lines) if "phase: evaluation" in line]
    recording = next(i for i, line in enumerate(lines) if line.startswith("gpudash: recording job:phases_loop.py"))
    assert told and recording < told[0], done.stderr
    with open(out, newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["row_kind"] == "event"]
    assert rows[0]["event_kind"] == "started" and all(r["workload"] == "job:phases_loop.py" for r in rows), rows[:3]
    assert any(r["event_kind"] == "phase" and r["event_what"] == "evaluation" for r in rows)
