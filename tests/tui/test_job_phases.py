"""A job's phases on the dashboard, driven by Textual's pilot: the header's phase now and goodput,
the strip under the throughput chart, a stall's notice and report (a scripted source); and a real
job's (``tests/data/jobs/phases_loop.py``, torch on the CPU) in its own header: its evaluation, a
stall the test ends once it has seen it, its goodput.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pytest
from rich.text import Text
from textual.widgets import Static

from gpudash.core.goodput import Goodput
from gpudash.core.protocol import EVALUATION, GOODPUT, STALLED_PHASE, STARTUP, Event, EventKind, Message, RunConfig
from gpudash.core.running import Running
from gpudash.job.session import JobSession
from gpudash.tui.app import GpuDashApp
from gpudash.tui.job_notices import STALL_COMMAND
from gpudash.tui.job_view import JobHeader
from gpudash.tui.stall_screen import StallScreen
from gpudash.tui.state import DashState
from gpudash.tui.widgets import HeaderFacts, MessageBar, plain_text

from .conftest import run_palette, wait_until
from .dashboard import SIZE, DashPilot, chart, chart_drawing, make_app, message, ready, shown
from .fakes import FakeSource, started
from .test_job_dashboard import job_config, job_dashboard
from .test_phases import WHERE, job_sample, phase, stalled

PHASES_LOOP = Path(__file__).resolve().parents[2] / "tests" / "data" / "jobs" / "phases_loop.py"
LATE_S = 120.0  # the most a loaded machine may take to show what a real job does: a failure's limit


def job_source() -> FakeSource:
    return FakeSource(RunConfig(workload="job:train.py", variant="", job=(sys.executable, "train.py")))


def training(t0: float, t1: float, train_s: float = 0.25) -> list[Message]:
    """A job's samples every 0.25 s over (t0, t1], its batch size unknown."""
    n = round((t1 - t0) / 0.25)
    return [job_sample(t0 + 0.25 * (i + 1), train_s, batch=0) for i in range(n)]


async def job_app(pilot: DashPilot, app: GpuDashApp, src: FakeSource) -> None:
    """A job started at 2 s that trains to 10 s, then evaluates from 10 s to 14 s, then trains to 20 s."""
    await ready(app, pilot)
    src.push(
        Event(2.0, EventKind.STARTED, message="train.py on cpu", running=Running("job:train.py", "", 0, device="cpu")),
        phase(2.0, STARTUP, "2.000"),
        *training(2.0, 10.0),
        phase(10.0, EVALUATION),
        *training(10.0, 14.0, 0.0),
        phase(14.0, EVALUATION, "4.000"),
        *training(14.0, 20.0),
    )
    app.refresh_now()
    await pilot.pause()


def header(app: GpuDashApp) -> str:
    return shown(app, "#header", SIZE[0])


def strip(app: GpuDashApp) -> str:
    """The throughput chart's last row: the phase strip."""
    return chart_drawing(chart(app, "throughput")).plain.splitlines()[-1]


@pytest.mark.slow  # Textual's drawing: 2 s of CPU, over 3 s on a loaded machine
async def test_a_job_s_phases_in_its_header_and_strip_and_a_stall_told_and_reported() -> None:
    src = job_source()
    app = make_app(src)
    async with app.run_test(size=SIZE) as pilot:
        await job_app(pilot, app, src)
        assert "batch – " in header(app) and "training 6 s · goodput 70%" in header(app)  # 14 s of 20
        row = strip(app)
        assert "▓" in row and "█" in row and row.index("█") < row.index("▓") < row.rindex("█")
        assert "█ train ▓ eval" in chart_drawing(chart(app, "throughput")).plain.splitlines()[0]  # the legend
        # an evaluation under way: the header says so; the phases are not told (they come often)
        said = message(app)
        src.push(phase(20.0, EVALUATION), *training(20.0, 23.0, 0.0))
        app.refresh_now()
        assert "evaluation 3 s" in header(app) and message(app) == said
        # a stall: an error with where the job waits; the palette's command shows every thread
        src.push(phase(23.0, EVALUATION, "3.000"), phase(54.0, STALLED_PHASE), stalled(55.0))
        app.refresh_now()
        assert "stalled 32 s" in header(app)  # since the last step, at 23 s
        assert message(app).startswith("✗ stalled: no step for 31 s") and app.query_one(MessageBar).has_class("-error")
        assert "!" in strip(app)
        await run_palette(pilot, app, "stalled", STALL_COMMAND)
        await wait_until(pilot, lambda: isinstance(app.screen, StallScreen), "the stall report")
        report = plain_text(app.screen.query_one("#stall-report", Static), 160)
        assert all(line in report for line in WHERE.splitlines()) and "still stalled" in report
        await pilot.press("escape")
        # steps again: said, and the header back to training
        src.push(phase(60.0, STALLED_PHASE, "37.000", "steps resumed after a 37 s stall"), *training(60.0, 61.0))
        app.refresh_now()
        assert message(app) == "steps resumed after a 37 s stall" and "training 1 s" in header(app)
        # the job's end: its own goodput
        src.push(
            Event(
                62.0,
                EventKind.MEASURED,
                what=GOODPUT,
                message="goodput 40.3% of 62.0 s: …",
                data=Goodput({"training": 25.0}, 62.0, 40.3),
            ),
            Event(62.0, EventKind.STOPPED, message="the job exited with code 0"),
        )
        app.refresh_now()
        assert "goodput 40%" in header(app) and "training" not in header(app)


async def test_a_family_s_run_has_no_strip_and_no_phase() -> None:
    src = FakeSource()
    app = make_app(src)
    async with app.run_test(size=SIZE) as pilot:
        await ready(app, pilot)
        src.push(started(1.0), job_sample(1.25, None))
        app.refresh_now()
        assert "goodput" not in header(app) and "│" not in chart_drawing(chart(app, "throughput")).plain.splitlines()[0]


def watched(app: GpuDashApp) -> tuple[list[str], list[str]]:
    """From now on, every text the message bar says and every second line the header shows: a
    loaded machine may show one only between two looks of the pilot."""
    said: list[str] = []
    headers: list[str] = []
    bar, head = app.query_one(MessageBar), app.query_one("#header", JobHeader)
    say, lines = bar.say, head.lines

    def say_and_keep(text: str, severity: str = "info") -> None:
        said.append(text)
        say(text, severity)

    def lines_and_keep(state: DashState, facts: HeaderFacts) -> tuple[Text, Text]:
        both = lines(state, facts)
        headers.append(both[1].plain)
        return both

    bar.say, head.lines = say_and_keep, lines_and_keep  # type: ignore[method-assign]
    return said, headers


@pytest.mark.slow
async def test_a_real_job_s_header_shows_its_evaluation_its_stall_told_with_where_it_waits_and_its_goodput(
    tmp_path: Path,
) -> None:
    go_on = tmp_path / "go-on"  # the lock holds until the test has seen the stall
    args = ["--steps", "8", "--step-s", "0.1", "--eval-every", "4", "--eval-batches", "10", "--eval-batch-s", "0.2"]
    args += ["--hang-at", "6", "--hang-s", "0.05", "--release-file", str(go_on)]  # evaluations of 2 s; a lock at 6
    config = replace(job_config(tmp_path, str(PHASES_LOOP), *args), stall_after_s=3.0)
    session = JobSession(config, capture=True)
    async with job_dashboard(session) as (pilot, app):
        said, headers = watched(app)
        told = lambda: any(text.startswith("✗ stalled: no step for") for text in said)  # noqa: E731
        await wait_until(pilot, told, "the stall", LATE_S)
        assert any(" · evaluation " in line for line in headers)  # the evaluation at step 4, while under way
        await wait_until(pilot, lambda: " · stalled " in header(app), "the header to say so")  # held till let go
        assert "phases_loop.py" in message(app)
        await run_palette(pilot, app, "stalled", STALL_COMMAND)
        await wait_until(pilot, lambda: isinstance(app.screen, StallScreen), "the stall report")
        report = plain_text(app.screen.query_one("#stall-report", Static), 160)
        assert "rank 0 (pid " in report and "MainThread waits at phases_loop.py" in report
        await pilot.press("escape")
        go_on.touch()
        resumed = lambda: any(text.startswith("steps resumed after") for text in said)  # noqa: E731
        await wait_until(pilot, resumed, "the steps again", LATE_S)
        await wait_until(pilot, lambda: session.exit_code is not None, "the job to end", LATE_S)
        await wait_until(pilot, lambda: "goodput" in header(app), "the job's goodput")
        app.refresh_now()
        assert "▓" in strip(app) and "!" in strip(app)
