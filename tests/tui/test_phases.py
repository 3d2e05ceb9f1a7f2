"""A job's phases as the dashboard keeps them (``PhaseTimeline`` in ``DashState``) and shows them (the
header's text, the strip, the stall's notices), from hand-made messages: no app, no torch."""

from __future__ import annotations

from dataclasses import replace

import pytest
from rich.text import Text

from gpudash.core.goodput import Goodput, PhaseSpan, StallReport
from gpudash.core.protocol import (
    CHECKPOINT,
    EVALUATION,
    GOODPUT,
    STALLED_PHASE,
    STARTUP,
    TRAINING,
    Event,
    EventKind,
    Message,
    RunConfig,
    Sample,
    SourceInfo,
)
from gpudash.tui.controller import DashController
from gpudash.tui.notices import Severity
from gpudash.tui.phase_strip import legend, phase_text, strip_row, with_strip
from gpudash.tui.phases import PhaseTimeline, Span
from gpudash.tui.stall_screen import NO_STALL, stall_text
from gpudash.tui.state import DashState
from gpudash.tui.stats_panel import stats_table

from .fakes import FakeSource, sample

WHERE = (
    "rank 0 (pid 123) MainThread waits at train.py:41 in main: lock.acquire()\n"
    "DataLoader worker (pid 130) MainThread waits at data.py:12 in __getitem__: time.sleep(3600)"
)
STALL_LINE = (
    "no step for 31 s; its steps take 0.5 s: rank 0 (pid 123) MainThread waits at train.py:41 in main: lock.acquire()"
)


def job_sample(t: float, train_s: float | None = 0.25, *, batch: int = 16) -> Sample:
    """A job's sample of 0.25 s, at 2 steps/s, its samples/s unknown where the batch is (0)."""
    s = replace(sample(t, 2.0, workload="job:train.py", variant="", batch=batch, interval=0.25), train_s=train_s)
    return s if batch else replace(s, samples_per_s=None)


def phase(t: float, what: str, after: str = "", message: str = "") -> Event:
    """A phase under way (no ``after``) or ended after ``after`` seconds, as the job's watch tells it."""
    span = PhaseSpan(float(after) if after else None)
    return Event(t, EventKind.PHASE, what, after=after, message=message or f"{what} {after or 'under way'}", data=span)


def stalled(t: float, details: bool = True) -> Event:
    """A stall told after 31 s, with where each thread waits (``details``) or its line alone."""
    report = StallReport(31.0, tuple(WHERE.splitlines())) if details else None
    return Event(t, EventKind.STALLED, what=STALLED_PHASE, message=STALL_LINE, data=report)


def job_run() -> list[Message]:
    """Startup to 2 s, training (every sample's 0.25 s), an evaluation [6, 8], a checkpoint [10, 11]."""
    out: list[Message] = [phase(3.0, STARTUP, "2.000")]  # told when the run started, after its first steps
    out += [job_sample(2.25 + 0.25 * i) for i in range(16)]  # to 6 s
    out += [phase(6.0, EVALUATION), *(job_sample(6.25 + 0.25 * i, 0.0) for i in range(8))]
    out += [phase(8.0, EVALUATION, "2.000"), *(job_sample(8.25 + 0.25 * i) for i in range(8))]  # to 10 s
    out += [phase(11.0, CHECKPOINT, "1.000"), *(job_sample(10.25 + 0.25 * i) for i in range(8))]  # to 12 s
    return out


def timeline(messages: list[Message]) -> PhaseTimeline:
    state = DashState()
    state.ingest_all(messages)
    return state.phases


def test_ended_phases_span_their_seconds_back_and_startup_from_the_launch() -> None:
    t = timeline(job_run())
    assert list(t.spans) == [Span(0.0, 2.0, STARTUP), Span(6.0, 8.0, EVALUATION), Span(10.0, 11.0, CHECKPOINT)]
    assert t.first_step_s == 2.0 and not t.open


def test_the_phase_now_is_the_one_under_way_a_stall_first_else_training_since_the_last_span() -> None:
    t = timeline([phase(1.0, STARTUP, "1.000"), job_sample(1.25)])
    assert t.current() == (TRAINING, 1.0)
    t.on_event(phase(4.0, EVALUATION))
    assert t.current() == (EVALUATION, 4.0)
    t.on_event(phase(35.0, STALLED_PHASE))  # told once it has lasted: since the last step; over an evaluation
    assert t.current() == (STALLED_PHASE, 1.25)
    t.on_event(phase(40.0, STALLED_PHASE, "35.000"))
    t.on_event(phase(41.0, EVALUATION, "37.000"))
    assert t.current() == (TRAINING, 41.0)
    t.on_event(Event(50.0, EventKind.STOPPED))
    assert t.current() is None  # the run has ended: no phase now


def test_a_phase_ended_after_0_s_was_none_after_all() -> None:
    t = timeline([job_sample(1.0), phase(2.0, EVALUATION), phase(2.1, EVALUATION, "0.000")])
    assert not t.spans and not t.open and t.current() == (TRAINING, 0.75)


def test_a_family_s_run_has_no_phases() -> None:
    state = DashState()
    state.ingest_all([sample(1.0, 10.0), sample(1.25, 10.0)])
    assert not state.phases.active and state.phases.current() is None and state.phases.goodput_pct(1.25) is None
    assert phase_text(state.phases, 1.25).plain == ""


def test_goodput_is_the_training_seconds_over_the_wall_time_then_the_job_s_own_account() -> None:
    t = timeline(job_run())
    assert t.training_s == pytest.approx(8.0)  # 32 samples of 0.25 s; the evaluation's 8 of 0 s
    assert t.goodput_pct(12.0) == pytest.approx(100 * 8 / 12)
    account = "goodput 51.7% of 23.9 s: startup 5.3 s · training 12.4 s"
    said = Goodput({"startup": 5.3, "training": 12.4}, 23.9, 51.73)
    t.on_event(Event(12.5, EventKind.MEASURED, what=GOODPUT, message=account, data=said))
    assert t.goodput_pct(12.5) == pytest.approx(51.73)
    # a recording from before the account was typed: its words are not read back; the count goes on
    t.on_event(Event(12.5, EventKind.MEASURED, what=GOODPUT, message=account))
    assert t.goodput_pct(12.0) == pytest.approx(100 * 8 / 12)


def test_each_bucket_shows_the_phase_that_took_most_of_it() -> None:
    t = timeline(job_run())
    # 12 buckets of 1 s over [0, 12] (centred on 0.5, 1.5, …): startup, training, the evaluation, the checkpoint
    cells = t.buckets(0.5, 11.5, 12, now_s=12.0)
    assert cells == [STARTUP] * 2 + [TRAINING] * 4 + [EVALUATION] * 2 + [TRAINING] * 2 + [CHECKPOINT, TRAINING]
    # fewer buckets than spans: a 3 s bucket over [5, 8] is most of all evaluation
    assert t.buckets(0.5, 12.5, 5, now_s=12.0)[2] == EVALUATION
    # a phase under way lasts until now; after the run's end nothing is known
    t.on_event(phase(12.0, EVALUATION))
    assert t.buckets(10.5, 14.5, 5, now_s=15.0) == [CHECKPOINT, TRAINING, EVALUATION, EVALUATION, EVALUATION]
    t.on_event(phase(13.0, EVALUATION, "1.000"))
    t.on_event(Event(13.0, EventKind.STOPPED))
    assert t.buckets(10.5, 14.5, 5, now_s=15.0)[-1] is None


def test_the_header_says_the_phase_for_how_long_and_goodput() -> None:
    t = timeline([*job_run(), phase(12.0, EVALUATION)])
    text = phase_text(t, now_s=15.0)
    assert text.plain == " · evaluation 3 s · goodput 53%"
    assert any(span.style == "bold yellow" for span in text.spans)
    t.on_event(phase(15.0, EVALUATION, "3.000"))
    assert phase_text(t, now_s=95.0).plain == " · training 01:20 · goodput 8%"


def test_the_strip_lines_up_with_the_chart_s_columns_and_its_legend_is_coloured() -> None:
    t = timeline(job_run())
    row = strip_row(t, 0.5, 11.5, range(3, 15), 20, now_s=12.0)  # a cell a second, from the 4th column
    assert row.plain == "   ░░████▓▓██▒█     "
    key = legend(t, 0.5, 11.5, 12.0, 12)
    assert key is not None and key.plain == "░ startup █ train ▓ eval ▒ ckpt"
    chart = with_strip(Text(f"  steps/s │ {key.plain}  \nplot"), key, row)
    assert chart.plain.endswith(row.plain) and len(chart.plain.splitlines()) == 3
    styled = {chart.plain[s.start : s.end]: str(s.style) for s in chart.spans}
    assert styled["▓"] == "yellow" and styled["█"] == "green"
    assert legend(timeline([sample(1.0, 10.0)]), 0.0, 1.0, 1.0, 10) is None  # a family's run: no strip


def test_an_unknown_batch_shows_as_a_dash_and_samples_s_as_a_gap() -> None:
    state = DashState()
    state.ingest_all([job_sample(0.25 * i, batch=0) for i in range(1, 40)])
    assert len(state.series["samples_per_s"]) == 0 and len(state.series["steps_per_s"]) == 39
    table = stats_table(state)
    assert table.title.plain.count("bs–") == 1 and "bs0" not in table.title.plain
    column = table.headers.index("samples/s")
    assert [row[column + 1] for row in table.plain_rows()] == ["–", "–", "–", "–"]


class Recording(FakeSource):
    """A replayed job's recording: its config names no command (a replay's never does)."""

    @property
    def info(self) -> SourceInfo:
        return SourceInfo(replay=True)


def controller(*messages: Message, replay: bool = False) -> tuple[DashController, list[str]]:
    """A job's controller (live, or a recording's) and what ``messages`` told."""
    src = Recording() if replay else FakeSource(RunConfig(workload="job:train.py", job=("python", "train.py")))
    c = DashController(src)
    return c, [n.text for n in c.ingest(messages)]


def test_a_stall_is_an_error_toast_its_end_a_note_and_the_other_phases_say_nothing() -> None:
    c, said = controller(job_sample(1.0), phase(2.0, EVALUATION), phase(3.0, EVALUATION, "1.000"))
    assert said == []  # phases come often: not told
    notices = c.ingest([stalled(40.0)])
    assert [(n.severity, n.toast) for n in notices] == [(Severity.ERROR, True)]
    assert STALL_LINE in notices[0].text and "ctrl+p" in notices[0].text
    resumed = c.ingest([phase(45.0, STALLED_PHASE, "36.000", "steps resumed after a 36 s stall")])
    assert [(n.text, n.severity, n.toast) for n in resumed] == [
        ("steps resumed after a 36 s stall", Severity.INFO, True)
    ]


def test_a_replayed_stall_is_told_too_without_a_toast() -> None:
    c, _ = controller(replay=True)
    (notice,) = c.ingest([stalled(40.0, details=False)])
    assert notice.severity == Severity.ERROR and not notice.toast and STALL_LINE in notice.text


def test_the_stall_report_lists_every_thread_and_says_when_steps_came_again() -> None:
    t = PhaseTimeline()
    assert stall_text(t, replay=False).plain == NO_STALL
    t.on_event(phase(9.0, STALLED_PHASE))
    t.on_event(stalled(40.0))
    shown = stall_text(t, replay=False).plain
    assert STALL_LINE in shown and "DataLoader worker (pid 130)" in shown and "still stalled" in shown
    t.on_event(phase(45.0, STALLED_PHASE, "36.000", "steps resumed after a 36 s stall"))
    assert "steps resumed after a 36 s stall (at 45 s)" in stall_text(t, replay=False).plain
    t.on_event(stalled(200.0, details=False))  # a recording's: the first line only
    assert "keeps the report's first line only" in stall_text(t, replay=True).plain
