"""A short job gets its figure (issue 62): 400 steps of about 2 ms — a second of training, the run
anyone tries first — reads within 5% of the script's own rate and with an interval, through
``record``, ``report`` and the dashboard's statistics; its warm-up is a number of steps, said. The
first windows of a job of short steps are short too (``gpudash.job.steps.EARLY_SPLIT``), so such a
run has windows enough; its warm-up is the windows within its first steps
(``gpudash.stats.segments.JOB_WARMUP_STEPS``), not a second it does not have."""

from __future__ import annotations

import dataclasses
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from gpudash.cli.main import main
from gpudash.diagnosis.evidence import Evidence
from gpudash.job.diagnosis_window import SETTLE_STEPS, ran_evidence
from gpudash.job.step_record import StepRecord
from gpudash.recording.replay import ReplaySource, read_all
from gpudash.stats.segments import JOB_WARMUP_STEPS
from gpudash.tui.state import DashState
from gpudash.tui.stats_panel import stats_table
from tests import printed
from tests.helpers import once_per_session
from tests.test_job import JOBS, gpudash, job_line
from tests.test_job_phases import record_job, summary_row

STEPS = 400
JOB = (str(JOBS / "between_steps.py"), "--steps", str(STEPS), "--step-s", "0.002")


@pytest.fixture(scope="module")
def short_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any, Any]:
    """The 400 steps recorded once for every xdist worker: the CSV, the command's output, the sidecar."""
    return once_per_session(
        tmp_path_factory, "short-run", lambda: record_job(tmp_path_factory.mktemp("short"), "short", *JOB)
    )


def own_rate(done: Any) -> float:
    return float(job_line(done.stdout)["steps_per_s"])


@pytest.mark.slow
def test_record_reads_a_one_second_runs_rate_with_its_interval_and_its_warm_up_in_steps(
    short_run: tuple[Path, Any, Any],
) -> None:
    out, done, _ = short_run
    (summary,) = printed.summaries(done.stderr)  # (a loaded machine adds "; noisy: …": read by its parts)
    figure = summary.figure
    assert figure.mean is not None and figure.half_width is not None and not summary.too_short, summary
    counted, warmup = summary.steps, summary.warmup_steps
    assert counted is not None and warmup is not None and summary.samples is None, summary  # steps, not samples
    assert JOB_WARMUP_STEPS <= warmup and counted + warmup <= STEPS and counted >= STEPS // 2
    csv_mean, low, high = summary_row(out)  # the CSV's summary row: the same figure, unrounded, with its interval
    assert low is not None and high is not None and low < csv_mean < high
    assert csv_mean == pytest.approx(own_rate(done), rel=0.05)
    assert figure.holds(csv_mean)  # the line's figure is the row's, rounded to its interval's digits


@pytest.mark.slow
def test_report_gives_the_short_runs_rate_with_its_interval(
    short_run: tuple[Path, Any, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    out, done, _ = short_run
    assert main(["report", str(out), "--json"]) == 0
    (config,) = json.loads(capsys.readouterr().out)["runs"][0]["configurations"]
    rate = config["steps_per_s"]
    assert rate["low"] is not None and rate["low"] < rate["mean"] < rate["high"]
    assert rate["mean"] == pytest.approx(own_rate(done), rel=0.05)
    assert main(["report", str(out)]) == 0  # the Markdown on stdout: the row has its interval
    (row,) = printed.table_rows(capsys.readouterr().out, "## Run 1:")
    assert row[1].startswith("job:"), row
    shown = printed.figure(row[3])  # steps/s ± CI
    assert shown is not None and shown.has_interval and shown.holds(rate["mean"]), row


@pytest.mark.slow
def test_the_dashboards_statistics_give_the_short_runs_rate_with_its_interval(short_run: tuple[Path, Any, Any]) -> None:
    out, done, _ = short_run
    state = DashState()
    state.ingest_all(read_all(ReplaySource(out)))
    segment = state.current
    assert segment is not None
    estimate = segment.estimate("steps_per_s")
    assert estimate is not None and estimate.has_interval
    assert estimate.mean == pytest.approx(own_rate(done), rel=0.05)
    table = stats_table(state)
    this = dict(zip(table.headers, dict(table.rows)["this cfg"], strict=True))
    assert "±" in this["steps/s"].plain


# -- diagnose on a job that ends first: a verdict over what it ran, or the length it needs ----------
def test_a_diagnosis_of_what_a_job_ran_leaves_its_warm_up_out_and_says_what_it_lacks() -> None:
    def records(n: int) -> list[StepRecord]:
        return [
            StepRecord(k, 0.002 * k, 2.0, 16, 0, 0.0005, 0, False, None if k == 1 else 0.002) for k in range(1, n + 1)
        ]

    evidence = ran_evidence(records(400), steps=30)
    assert isinstance(evidence, Evidence)
    assert evidence.steps == 400 - 1 - 2 * SETTLE_STEPS - 1  # untimed first step, the warm-up, the window's start
    assert evidence.step_ms == pytest.approx(2.0) and evidence.input_ms == pytest.approx(0.5)
    why = ran_evidence(records(40), steps=30)
    assert why == (
        "the job ended after 40 steps (0.078 s of training at 500.0 steps/s); a diagnosis needs about 51 "
        "(about 0.10 s at that rate): give it more steps"
    )
    measured = [dataclasses.replace(r, profiled=r.step in (3, 4)) for r in records(40)]  # gpudash's one-offs
    said = ran_evidence(measured, steps=30)
    assert isinstance(said, str) and said.startswith("the job ended after 40 steps (37 timed, 2 measuring: 0.074 s at")
    failed = ran_evidence(records(40), steps=30, exit_code=1)  # more steps would not help a job that fails
    assert isinstance(failed, str) and failed.startswith("the job ended (exit code 1) after 40 steps")
    assert failed.endswith("(about 0.10 s at that rate), and the job to run them without failing")
    refused = ran_evidence([], steps=30, exit_code=2)  # argparse refused a flag: no step, no step count to ask for
    assert refused == "the job failed (exit code 2) before its first step: its own output says why"


@pytest.mark.slow
def test_diagnose_on_a_job_that_ends_before_its_window_gives_the_verdict_of_the_steps_it_ran() -> None:
    done = gpudash(
        "diagnose", "--no-check", "--warmup", "600", "--", sys.executable, *JOB
    )  # a window never asked for in time
    assert done.returncode == 0, done.stderr[-2000:]
    (verdict,) = [line for line in done.stdout.splitlines() if line.strip()][:1]
    assert re.search(r"over the \d+ steps it ran after its warm-up: the job ended before the diagnosis window", verdict)
    assert "0 steps/s" not in done.stdout + done.stderr
    as_json = gpudash("diagnose", "--json", "--no-check", "--warmup", "600", "--", sys.executable, *JOB)
    said = json.loads(as_json.stdout)  # what the verdict rests on, as the text says it
    assert "the job ended before the diagnosis window; no profiler window" in said["note"], said
    assert said["batch_size"] == 16 and said["bound"]  # the loader's batch (one not known: null, not 0)


@pytest.mark.slow
def test_diagnose_of_a_job_that_fails_after_enough_steps_gives_their_verdict_and_exits_with_its_code() -> None:
    """A job that fails once it has run enough steps for a verdict over them: the verdict says it
    failed, and ``diagnose`` exits with the job's own status (it exited 0)."""
    plain = str(JOBS / "plain_loop.py")
    done = gpudash("diagnose", "--no-check", "--warmup", "600", "--", sys.executable, plain, "--steps", "200")
    failed = gpudash(
        "diagnose", "--no-check", "--warmup", "600", "--", sys.executable, plain, "--steps", "200", "--exit-code", "3"
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert failed.returncode == 3, failed.stderr[-2000:]
    (verdict,) = [line for line in failed.stdout.splitlines() if line.strip()][:1]
    assert re.search(r"over the \d+ steps it ran after its warm-up: the job failed \(exit code 3\) before", verdict)


@pytest.mark.slow
def test_diagnose_of_a_job_that_refuses_its_arguments_says_it_once_and_exits_with_its_code() -> None:
    """A mistyped flag: argparse exits 2 before the first step. One line says the job failed before
    it started — not a second one asking for 51 steps of a job that cannot start."""
    done = gpudash("diagnose", "--no-check", "--", sys.executable, str(JOBS / "plain_loop.py"), "--stesp", "200")
    assert done.returncode == 2, done.stderr[-2000:]
    said = [line for line in done.stderr.splitlines() if line.startswith("gpudash: error:")]
    assert said == [
        "gpudash: error: the workload failed before it started, nothing recorded: the job exited with code 2"
    ]
    assert "unrecognized arguments: --stesp" in done.stderr and done.stdout.strip() == ""
