"""A job's figures are its training's (``gpudash -- CMD``): steps measured as steps, its wall time by
phase (start-up, evaluation, checkpoints, stalls, teardown) with goodput, and the line a hung job
waits on. The parts alone (the hooks' span keeping, the session's tally, the stall's report), then
real scripts through the real command on the CPU (``tests/data/jobs/phases_loop.py`` and its
Lightning and Hugging Face kin), read back by ``report`` and ``replay``."""

from __future__ import annotations

import csv
import json
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from gpudash.boot.gpudash_boot import phases as phases_part
from gpudash.core.protocol import (
    CHECKPOINT,
    EVALUATION,
    OTHER,
    STALLED_PHASE,
    STARTUP,
    TEARDOWN,
    TRAINING,
    Event,
    EventKind,
    ExitCode,
)
from gpudash.job.stalls import Stall, report, stall_after_s
from gpudash.job.wall_time import JobPhases
from tests import printed
from tests.helpers import once_per_session
from tests.test_job import JOBS, TIMEOUT_S, gpudash, job_line

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


# -- the session's tally, the stall's report ---------------------------------------------------------
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


def test_a_stall_names_the_rank_that_stalled_first_and_a_process_that_cannot_answer() -> None:
    assert stall_after_s(1.0) == 30.0 and stall_after_s(5.0) == 50.0
    stall = Stall(since=0.0, asked_at=31.0, asked={11: "rank 0", 12: "rank 1"}, first_rank=1)
    stall.answers[12] = {
        "threads": [
            {
                "thread": "MainThread",
                "main": True,
                "user": {"file": "/x/train.py", "line": 41, "function": "main", "text": "dist.all_reduce(t)"},
            },
            {
                "thread": "pin",
                "main": False,
                "inner": {"file": "/usr/lib/threading.py", "line": 320, "function": "wait"},
            },
        ]
    }
    assert not stall.complete(31.5) and stall.complete(34.1)
    line, lines = report(stall, 35.0, 0.5)
    where = "rank 1 (pid 12) MainThread waits at train.py:41 in main: dist.all_reduce(t)"
    assert line == f"no step for 35 s; its steps take 0.5 s: {where}"
    assert lines[-1].startswith("rank 0 (pid 11) did not answer within 3 s: a thread holds the GIL")
    assert "py-spy dump --pid 11" in lines[-1]


# -- real scripts through gpudash record --------------------------------------------------------------
def csv_rows(path: Path, kind: str) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return [row for row in csv.DictReader(f) if row["row_kind"] == kind]


def summary_row(path: Path) -> tuple[float, float | None, float | None]:
    (row,) = csv_rows(path, "summary")
    low, high = (float(row[k]) if row[k] else None for k in ("ci_low", "ci_high"))
    return float(row["steps_per_s"]), low, high


def _resumed(stderr: str) -> bool:
    """``record`` said that the job's steps resumed after a stall (a "phase" event's line)."""
    return any(e.text.startswith("steps resumed after a ") for e in printed.event_lines(stderr, "phase"))


def record_job(tmp_path: Path, name: str, *job: str, options: tuple[str, ...] = ()) -> tuple[Path, Any, dict[str, Any]]:
    out = tmp_path / f"{name}.csv"
    done = gpudash("record", str(out), *options, "--", sys.executable, *job)
    assert done.returncode == 0, done.stderr[-2000:]
    return out, done, json.loads(out.with_suffix(".json").read_text())


def _told(out: Path) -> bool:
    """The recording under way holds a stall told (where the job waits)."""
    if not out.exists():
        return False
    with open(out, newline="") as f:
        return any(row.get("event_kind") == EventKind.STALLED.value for row in csv.DictReader(f))


def _record_stalled(
    tmp_path: Path, name: str, job: tuple[str, ...], then: Callable[[subprocess.Popen[str]], object]
) -> tuple[Path, Any, dict[str, Any]]:
    """``gpudash record --stall-after 3`` of a job that stalls; once the recording holds the stall
    told, ``then(gpudash)`` (release the job, or stop the recording): the CSV, the command's
    output, the sidecar. An event, not a time, moves it on: a loaded machine only makes it late."""
    out = tmp_path / f"{name}.csv"
    command = [sys.executable, "-m", "gpudash", "record", str(out), "--stall-after", "3", "--", sys.executable, *job]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while not _told(out) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        told = _told(out)
        then(proc)
        stdout, stderr = proc.communicate(timeout=TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert told, stderr[-2000:]
    done = subprocess.CompletedProcess(command, proc.returncode, stdout, stderr)
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
def test_a_job_hung_on_a_lock_is_stalled_with_its_line_and_the_ask_leaves_it_as_it_was(tmp_path: Path) -> None:
    go_on = tmp_path / "go-on"  # the lock holds until the stall is told
    job: tuple[str, ...] = (PHASES_LOOP, "--steps", "20", "--step-s", "0.1", "--hang-at", "6", "--hang-s", "0.05")
    job += ("--release-file", str(go_on), "--own-handlers", "--workers", "1")
    out, done, meta = _record_stalled(tmp_path, "hung", job, lambda _: go_on.touch())
    assert done.returncode == 0, done.stderr[-2000:]
    assert "threads changed" not in done.stdout and "signal handlers changed" not in done.stdout
    events = csv_rows(out, "event")
    told = [r for r in events if r["event_kind"] == EventKind.STALLED.value][0]  # (its exit, if slow, may be a 2nd)
    assert "rank 0" in told["event_message"] and "phases_loop.py:" in told["event_message"]
    assert "lock.acquire(timeout=args.hang_s)" in told["event_message"]
    assert any(e.text.startswith("no step for") for e in printed.event_lines(done.stderr, "stalled")), done.stderr
    assert _resumed(done.stderr), done.stderr
    stalled_s = float(told["event_message"].split("no step for ")[1].split(" s")[0])  # when told
    ended = [float(r["event_after"]) for r in events if r["event_what"] == STALLED_PHASE and r["event_after"]]
    assert meta["stalls"] and ended[0] >= max(3.0, stalled_s - 0.5)  # it lasted past its telling
    assert meta["phases"][STALLED_PHASE] >= ended[0]
    mean, _, _ = summary_row(out)  # the step after the stall is the stall's, not a slow step (that would halve it)
    assert mean == pytest.approx(float(job_line(done.stdout)["steps_per_s"]), rel=0.1)


@pytest.mark.slow
def test_a_stall_in_a_dataloader_worker_shows_the_workers_line(tmp_path: Path) -> None:
    job = (PHASES_LOOP, "--steps", "100", "--step-s", "0.05", "--hang-in-worker", "--workers", "2")
    out, done, meta = _record_stalled(tmp_path, "worker", job, lambda gd: gd.send_signal(signal.SIGINT))
    assert done.returncode == ExitCode.INTERRUPTED, done.stderr[-2000:]  # stopped, as Ctrl-C does
    assert [r["event_message"] for r in csv_rows(out, "event") if r["event_kind"] == EventKind.STALLED.value]
    where = "\n".join(line for stall in meta["stalls"] for line in stall["where"])
    assert "DataLoader worker" in where and "in __getitem__: time.sleep(3600)" in where
    assert "rank 0" in where  # and where the training loop waits for it


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
    mean, _, _ = summary_row(out)
    assert mean == pytest.approx(float(job_line(done.stdout)["steps_per_s"]), rel=0.10)
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
def test_with_torchrun_the_rank_that_stalled_is_named_first_and_the_others_wait_for_it(tmp_path: Path) -> None:
    ddp = str(JOBS / "ddp_loop.py")
    torchrun = ("-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", ddp, "20", "1:10:8")
    out, done, meta = record_job(tmp_path, "ddp", *torchrun, options=("--stall-after", "3"))
    (first, *rest) = meta["stalls"][0]["where"]
    assert first.startswith("rank 1 ") and "ddp_loop.py:" in first and "time.sleep(hang_s)" in first
    assert any(line.startswith("rank 0 ") and "loss.backward()" in line for line in rest)  # in the all-reduce
    assert _resumed(done.stderr), done.stderr


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
