"""Long steps are steps (issue 73): a job whose steps take seconds is judged against its own steps —
no stall before its median step is known, none while a step computes (its processes looked at
twice: ``gpudash.job.stall_probe``), a stall where nothing moves — and reads its rate with an
interval from the steps' own durations, its training time in ``training``. The parts alone, then
``tests/data/jobs/lbfgs_closure.py`` (LBFGS with a closure, as pytorch/examples'
time_sequence_prediction) through ``gpudash record``."""

from __future__ import annotations

import csv
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from gpudash.core.protocol import STALLED_PHASE, TRAINING, EventKind, Sample
from gpudash.job.phase_watch import PhaseWatch
from gpudash.job.stall_probe import GAP_S
from gpudash.job.stalls import Stall
from gpudash.job.step_record import StepRecord
from gpudash.job.steps import LAG_S, JobSamples
from gpudash.stats.segments import SegmentTracker
from tests import printed
from tests.helpers import once_per_session
from tests.messages import job_sample
from tests.test_job import JOBS, gpudash

LBFGS = str(JOBS / "lbfgs_closure.py")
PID = 4_999_999  # above Linux's largest pid: no /proc of it, so only the answers say


# -- the statistics: a long step's window is a batch by itself ---------------------------------------
def _job_sample(i: int, steps_per_s: float, train_s: float, interval_s: float = 0.25) -> Sample:
    return job_sample(float(i), steps_per_s, train_s, steps=i, interval_s=interval_s, workload="job:lbfgs.py")


def test_four_long_steps_have_an_interval_and_eight_short_windows_are_needed_for_one() -> None:
    """A 50 s step a window: four of them give ``0.020 ± …`` (a batch each); windows of short steps
    still need two a batch, so four of those give none."""
    tracker = SegmentTracker()
    tracker.on_sample(_job_sample(1, 0.0, 0.0))  # the first step's window: warm-up
    for i, seconds in enumerate((49.0, 51.0, 50.0, 50.5), start=2):
        tracker.on_sample(_job_sample(i * 60, 1 / seconds, seconds))
    segment = tracker.current
    assert segment is not None
    estimate = segment.estimate("steps_per_s")
    assert estimate is not None and estimate.has_interval and estimate.mean == pytest.approx(4 / 200.5)
    assert re.search(r"steps/s 0\.0200 ± 0\.000\d \(95% CI over \d+ steps", segment.summary())
    short = SegmentTracker()
    short.on_sample(_job_sample(1, 0.0, 0.0))
    for i in range(2, 6):
        short.on_sample(_job_sample(i, 40.0, 0.25))
    assert short.current is not None
    assert not short.current.estimate("steps_per_s").has_interval  # type: ignore[union-attr]
    assert short.current.needs_s("steps_per_s", 0.25) == pytest.approx(4 * 0.25)  # four more windows
    long_ = SegmentTracker()
    long_.on_sample(_job_sample(1, 0.0, 0.0))
    long_.on_sample(_job_sample(60, 0.02, 50.0))
    assert long_.current is not None and long_.current.needs_s("steps_per_s", 0.25) == pytest.approx(3 * 50.0)


def test_a_long_step_under_way_reads_one_over_its_seconds_and_a_late_window_reads_the_step_before_its_end() -> None:
    """The first timed step, before any rate: one over its seconds so far, not 0; a window closed
    after a later step's record came reads the step under way at its own end, not the last rate."""
    job = JobSamples("job:lbfgs.py", "", interval_s=0.25, t0=0.0)
    job.add(0, StepRecord(1, 0.0, None, 0, 0, 0.0, None, False))
    out = job.due(2.0 + LAG_S)[1:]  # (the first step's own window: none timed yet)
    assert out and all(s.steps_per_s > 0 and s.train_s == 0 for s in out)
    assert out[-1].steps_per_s == pytest.approx(1 / 2.0)
    job.add(0, StepRecord(2, 2.1, None, 0, 0, 0.0, None, False, 2.1))
    job.add(0, StepRecord(3, 4.2, None, 0, 0, 0.0, None, False, 2.1))  # arrives before 2.25–4.0 close
    later = job.due(4.25 + LAG_S)
    assert later[0].steps_per_s == pytest.approx(1 / 2.1)
    assert all(s.steps_per_s <= 1 / 2.1 + 1e-9 for s in later[:-1])  # never the next step's rate early


# -- the stall's two looks -----------------------------------------------------------------------------
class Channel:
    """gpudash's end of the channel: every request taken."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def request(self, ctl: str, message: dict[str, Any]) -> bool:
        self.asked.append(ctl)
        return True


def _answer(line: int, cpu_s: float, file: str = "/x/train.py") -> dict[str, Any]:
    thread = {
        "thread": "MainThread",
        "main": True,
        "inner": {"file": file, "line": line, "function": "closure"},
        "user": {"file": "/x/train.py", "line": line, "function": "closure", "text": "loss.backward()"},
        "cpu_s": cpu_s,
    }
    return {"k": "stacks", "pid": PID, "threads": [thread]}


def _watched(median_s: float | None) -> tuple[PhaseWatch, list[dict[str, Any]], Channel]:
    said: list[dict[str, Any]] = []
    samples = JobSamples("job:lbfgs.py", "", interval_s=0.25, t0=0.0)
    samples.add(0, StepRecord(1, 1.0, None, 0, 0, 0.0, None, False))
    if median_s is not None:
        samples.add(0, StepRecord(2, 1.0 + median_s, None, 0, 0, 0.0, None, False, median_s))
    channel = Channel()
    watch = PhaseWatch(0.0, samples, channel, lambda kind, **kw: said.append({"kind": kind, **kw}))  # type: ignore[arg-type]
    watch.stall_min_s = 3.0
    return watch, said, channel


def _look(watch: PhaseWatch, now: float, answer: dict[str, Any] | None) -> None:
    watch.check_stall(now, lambda: [(PID, "rank 0", "sock")])
    if answer is not None and watch.looks:
        watch.on_message("stacks", answer, lead=True)


def test_no_stall_before_a_median_step_however_long_the_first_timed_step() -> None:
    watch, said, channel = _watched(None)
    for now in (5.0, 40.0, 400.0):
        watch.check_stall(now, lambda: [(PID, "rank 0", "sock")])
    assert not said and not channel.asked and watch.stall is None


@pytest.mark.parametrize(
    ("second", "stalled"),
    [
        (_answer(41, 0.5), False),  # moved on: another line
        (_answer(40, 1.3), False),  # the same line, its thread on a CPU (0.8 of 1 s)
        (_answer(40, 0.52), True),  # the same line, idle: a hang
        (_answer(40, 0.5, file="/usr/lib/torch/autograd/graph.py"), True),  # its backward idle, one rank
    ],
)
def test_a_step_past_the_threshold_is_stalled_only_where_nothing_moved_or_computed(
    second: dict[str, Any], stalled: bool
) -> None:
    """Ten 0.5 s medians are 5 s: past them the job is looked at twice, ``GAP_S`` apart; a stack
    that moved or a thread on a CPU is a long step (nothing said, looked at again later), one that
    did neither is a stall, told with where it waits."""
    watch, said, channel = _watched(0.5)
    last = 1.5
    first = _answer(40, 0.5) if second["threads"][0]["inner"]["file"] == "/x/train.py" else second
    _look(watch, last + 5.5, first)
    _look(watch, last + 5.5 + GAP_S, second)
    _look(watch, last + 5.6 + GAP_S, None)  # the verdict
    assert len(channel.asked) == 2
    told = [m for m in said if m["kind"] == EventKind.STALLED]
    assert bool(told) is stalled and (watch.stall is not None) is stalled
    if stalled:
        assert [m["message"] for m in said if m["kind"] == EventKind.PHASE][0].startswith("stalled: no step for")
        assert f"rank 0 (pid {PID}) MainThread waits at train.py:40 in closure" in told[0]["message"]
    else:
        assert not said and watch.samples.working_after == last  # its rate goes on falling, not 0
        _look(watch, last + 30.0, None)
        assert len(channel.asked) == 2  # looked at again only AGAIN_S later


def test_a_rank_waiting_for_another_in_a_collective_is_not_its_work() -> None:
    from gpudash.job.stall_probe import working

    threads = {"main": True, "inner": {"file": "/t/torch/distributed/c10d.py", "line": 9, "function": "wait"}}
    first = Stall(since=0.0, asked_at=10.0, asked={11: "rank 0", 12: "rank 1"})
    second = Stall(since=0.0, asked_at=11.0, asked={11: "rank 0", 12: "rank 1"})
    first.answers[11] = {"threads": [{**threads, "cpu_s": 1.0}]}
    second.answers[11] = {"threads": [{**threads, "cpu_s": 2.0}]}  # NCCL spins: on a CPU, waiting
    first.answers[12] = {"threads": [{"main": True, "inner": {"file": "/x/a.py", "line": 3}, "cpu_s": 1.0}]}
    second.answers[12] = {"threads": [{"main": True, "inner": {"file": "/x/a.py", "line": 3}, "cpu_s": 1.0}]}
    assert working(first, second) is None
    first.cpu[12], second.cpu[12] = 5.0, 5.9
    del first.answers[12], second.answers[12]  # rank 1 holds the GIL in native code, computing
    assert working(first, second) == "rank 1 computes in native code (it did not answer; its CPU time advanced)"


# -- a real LBFGS job ------------------------------------------------------------------------------------
# 27 steps of 0.15–0.4 s (5 closure evaluations at most: a window of 0.25 s holds one or two; past the
# warm-up's steps enough windows for an interval before the long step also on a fast machine, where 15
# steps of 0.15 s left 5 windows, too few: "too short"), the last one on sequences 40 times longer
# (about 40 times as long: 6–16 s here): past ten median steps, computing, and looked at twice well
# before it ends however loaded the machine (at 20 times its last window once read 0 steps/s under the
# whole suite: the step had not run long enough past the ten median steps of a loaded start);
# --stall-after 1 lowers the 30 s floor so that the first timed step (before any median) and the long
# one would both have been called stalls.
STEPS = 28
THE_SHORT_STEPS = ("--waves", "16", "--length", "50", "--max-iter", "5", "--steps", str(STEPS))
LBFGS_JOB = (*THE_SHORT_STEPS, "--long-at", str(STEPS - 1), "--long-x", "40")


def _record_lbfgs(tmp: Path) -> tuple[Path, str, str, dict[str, Any]]:
    out = tmp / "lbfgs.csv"
    job = (sys.executable, LBFGS, *LBFGS_JOB)  # one thread: two, on a loaded 2-core machine, are 30× slower
    options = ("--stall-after", "1", "--progress-every", "2")
    done = gpudash("record", str(out), *options, "--", *job, env={"OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    return out, done.stdout, done.stderr, json.loads(out.with_suffix(".json").read_text())


@pytest.fixture(scope="module")
def lbfgs_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str, dict[str, Any]]:
    return once_per_session(tmp_path_factory, "job-lbfgs-run", lambda: _record_lbfgs(tmp_path_factory.mktemp("lbfgs")))


@pytest.mark.slow
def test_an_lbfgs_job_of_long_steps_is_never_stalled_and_its_training_is_training(
    lbfgs_run: tuple[Path, str, str, dict[str, Any]],
) -> None:
    out, stdout, stderr, meta = lbfgs_run
    with open(out, newline="") as f:
        rows = list(csv.DictReader(f))
    assert not [r for r in rows if r["event_kind"] == EventKind.STALLED.value], stderr[-3000:]
    assert "stalled" not in stderr and not meta.get("stalls") and meta["phases"][STALLED_PHASE] == 0
    own = re.search(rf"lbfgs_closure: {STEPS} steps in ([\d.]+) s", stdout)
    assert own is not None
    own_share = 100 * float(own.group(1)) / meta["wall_s"]  # the job's own time stepping, of the wall time
    assert meta["goodput_pct"] == pytest.approx(own_share, abs=5.0)
    assert meta["phases"][TRAINING] == pytest.approx(float(own.group(1)), rel=0.1)
    (summary,) = printed.summaries(stderr)
    assert summary.figure.has_interval and summary.steps, summary
    (row,) = [r for r in rows if r["row_kind"] == "summary"]
    assert row["ci_low"] and row["ci_high"]
    progress = printed.progress_lines(stderr)
    assert progress and not [p for p in progress if p.now == 0 and p.figure is None]  # never "0 steps/s … warming up"
    last = progress[-1]
    assert last.figure is not None and last.figure.half_width is not None and last.steps, stderr[-2000:]
    long_step = [float(r["steps_per_s"]) for r in rows if r["row_kind"] == "sample" and r["steps"] == str(STEPS - 1)]
    assert long_step[-1] > 0  # found computing past ten median steps: its rate falls, never 0 at its end
