"""What a job does between its steps that no hook times, once the hooks have said it (issue 61): the
session's tally counts an ``other`` span once and one told during a stall as the stall's; gpudash's
own profiling is said as gpudash's and left out of goodput's wall time, alike in the tally, the
dashboard's live figure and a recording without its sidecar; the dashboard's strip shows ``other``
with its own glyph (the hooks' span keeper and a real script: tests/test_job_phases_other.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpudash.core.goodput import PhaseSpan
from gpudash.core.protocol import CHECKPOINT, OTHER, PROFILING, STALLED_PHASE, STARTUP, TRAINING, Event, EventKind
from gpudash.core.samples import Sample  # (the message kinds' own module)
from gpudash.job.phase_watch import PhaseWatch
from gpudash.job.stalls import Stall
from gpudash.job.step_record import StepRecord
from gpudash.job.steps import JobSamples
from gpudash.report.command import phases_section
from gpudash.report.load import PhaseRows, Run
from gpudash.tui.phase_strip import legend, strip_row
from gpudash.tui.phases import PhaseTimeline, Span
from tests.messages import job_sample


# -- the session's tally, the dashboard, a recording without its sidecar ------------------------------
def _watched(kind: str, step_s: float, span: tuple[float, float]) -> tuple[PhaseWatch, list[dict[str, Any]]]:
    """The session's tally of three steps of ``step_s`` from 1 s, a ``kind`` span between the last
    two, and the events it made."""
    emitted: list[dict[str, Any]] = []
    watch = PhaseWatch(0.0, JobSamples("job:x.py", "", 0.25, 0.0), None, lambda *_, **kw: emitted.append(kw))  # type: ignore[arg-type]
    watch.step(StepRecord(1, 1.0, None, 0, 0, 0.0, None, False, None))
    watch.step(StepRecord(2, 1.0 + step_s, None, 0, 0, 0.0, None, False, step_s))
    t0, t1 = span
    watch.on_message("phase", {"kind": kind, "t0": t0, "t1": t1, "s": t1 - t0}, lead=True)
    watch.step(StepRecord(3, t1 + step_s, None, 0, 0, 0.0, None, False, step_s))
    return watch, emitted


def phase_event(t: float, what: str, after: str, message: str) -> Event:
    """A phase that ended after ``after`` seconds, as the job's watch tells it."""
    return Event(t, EventKind.PHASE, what=what, after=after, message=message, data=PhaseSpan(float(after)))


def test_an_other_span_is_counted_once_and_one_told_during_a_stall_is_the_stalls() -> None:
    watch, emitted = _watched(OTHER, 1.0, (2.0, 4.0))
    assert emitted[-1]["message"] == "other 2.00 s between steps, no training seen in it"
    totals = watch.phases.totals(5.0)
    assert totals[OTHER] == pytest.approx(2.0) and totals[TRAINING] == pytest.approx(2.0)
    assert sum(totals.values()) == pytest.approx(5.0)
    watch.stall = Stall(since=5.0, asked_at=40.0)  # the job went quiet for long: a stall
    watch.phases.begin(STALLED_PHASE, 5.0)
    watch.on_message("phase", {"kind": CHECKPOINT, "t0": 5.0, "t1": 45.0, "s": 40.0}, lead=True)
    watch.step(StepRecord(4, 46.0, None, 0, 0, 0.0, None, False, 1.0))
    totals = watch.phases.totals(46.0)
    assert totals[CHECKPOINT] == 0.0 and totals[STALLED_PHASE] == pytest.approx(41.0)
    assert sum(totals.values()) == pytest.approx(46.0)


def test_profiling_is_said_as_gpudashs_and_left_out_of_goodputs_wall_time() -> None:
    watch, emitted = _watched(PROFILING, 2.0, (3.0, 4.0))
    assert emitted[-1]["what"] == PROFILING
    assert emitted[-1]["message"].startswith("profiling 1.00 s: gpudash's profiler window")
    totals = watch.phases.totals(6.0)
    assert totals[PROFILING] == pytest.approx(1.0) and totals[OTHER] == pytest.approx(0.0)
    assert watch.phases.goodput_pct(6.0) == pytest.approx(100 * 4.0 / 5.0)  # training 4 s of the job's 5
    assert "profiling 1.0 s" in watch.phases.line(6.0)
    timeline = PhaseTimeline()  # the dashboard's live figure: the same share
    timeline.on_event(phase_event(4.0, PROFILING, "1.000", "profiling 1.00 s"))
    timeline.on_sample(job_sample(6.0, 2.0, 4.0, batch=16))  # 4 s of training by 6 s
    assert timeline.goodput_pct(6.0) == pytest.approx(100 * 4.0 / 5.0)
    rows = PhaseRows()  # a recording without its sidecar: the same goodput
    run: list[Event | Sample] = [
        phase_event(1.0, STARTUP, "1.000", "startup 1.00 s"),
        *(_job_sample(1.25 + 0.25 * i) for i in range(8)),
        phase_event(4.0, PROFILING, "1.000", "profiling 1.00 s"),
        *(_job_sample(4.25 + 0.25 * i) for i in range(8)),
    ]
    for m in run:
        rows.add(m)
    phases = rows.phases()
    assert phases is not None and phases.seconds[PROFILING] == pytest.approx(1.0)
    assert phases.goodput_pct == pytest.approx(100 * 4.0 / 5.0)
    section = "\n".join(phases_section(Run(Path("r.csv"), "recording", {}, (), phases=phases)))
    assert "training's share of the wall time less its profiling, not the job's own time): **80.0%**" in section
    assert "| profiling | 1.0 | 16.7% |" in section  # of the whole wall time, as every row


def _job_sample(t: float) -> Sample:
    """A job's 0.25 s window of training at 2 steps/s."""
    return job_sample(t, 2.0, 0.25, batch=16)


def _other_run() -> list[Any]:
    """Startup to 2 s, training to 6 s, 2 s of other work between two steps, training to 10 s."""
    return [
        phase_event(3.0, STARTUP, "2.000", "startup 2.00 s"),
        *(_job_sample(2.25 + 0.25 * i) for i in range(16)),
        phase_event(8.0, OTHER, "2.000", "other 2.00 s between steps"),
        *(_job_sample(8.25 + 0.25 * i) for i in range(8)),
    ]


def test_the_dashboards_strip_shows_other_with_its_own_glyph_and_a_recording_without_sidecar_counts_it_once() -> None:
    timeline = PhaseTimeline()
    for m in _other_run():
        if isinstance(m, Event):
            timeline.on_event(m)
        else:
            timeline.on_sample(m)
    assert Span(6.0, 8.0, OTHER) in timeline.spans
    cells = timeline.buckets(0.5, 9.5, 10, 10.0)
    assert cells[6] == OTHER and cells[3] == TRAINING
    assert "▚ other" in legend(timeline, 0.5, 9.5, 10.0, 10).plain  # type: ignore[union-attr]
    assert "▚" in strip_row(timeline, 0.5, 9.5, range(0, 10), 10, 10.0).plain
    rows = PhaseRows()
    for m in _other_run():
        rows.add(m)
    phases = rows.phases()
    assert phases is not None and phases.seconds[OTHER] == pytest.approx(2.0)  # its span: not twice
    assert sum(phases.seconds.values()) == pytest.approx(phases.wall_s)
