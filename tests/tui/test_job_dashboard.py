"""The dashboard of the user's own job (``gpudash -- CMD``), driven by Textual's pilot over a real
``JobSession`` running a real command: the output pane (``o``), the keys that do not apply to a
job, the question on quit (stop it, leave it running, stay) and the job's exit status.

The jobs are ``tests/data/jobs/plain_loop.py`` (torch, on the CPU: a job that crashes after its
steps were seen) and a few lines of Python: one that writes plain_loop's last line and ends, one
that writes a coloured line and a progress bar then waits, one that chatters (no torch: quick).
"""

from __future__ import annotations

import fcntl
import os
import pty
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import pytest
from textual.css.query import NoMatches
from textual.pilot import Pilot
from textual.widgets import Static

from gpudash.core.protocol import EngineSource, Event, EventKind, RunConfig, SourceInfo
from gpudash.job.command import variant, workload_name
from gpudash.job.session import JobSession
from gpudash.tui.app import GpuDashApp
from gpudash.tui.job_view import QUESTION, OutputPane, QuitJobScreen, job_exit_status, run_job
from gpudash.tui.screens import HelpScreen
from gpudash.tui.widgets import plain_text

from .conftest import palette_titles, wait_until
from .dashboard import SIZE, DashPilot, message, running, shown
from .fakes import FakeSource

ROOT = Path(__file__).resolve().parents[2]
PLAIN_LOOP = ROOT / "tests" / "data" / "jobs" / "plain_loop.py"
# a coloured line, then a progress bar written in place (\r, an erase-line sequence), then a wait
LIVE = (
    "import sys, time\n"
    "print('\\x1b[31mred\\x1b[0m and plain', flush=True)\n"
    "sys.stdout.write('10%'); sys.stdout.flush(); time.sleep(0.3)\n"
    "sys.stdout.write('\\r\\x1b[2K20%'); sys.stdout.flush()\n"
    "time.sleep(60)\n"
)
# a hundred lines at once, then a line every 50 ms
CHATTY = (
    "import time\n"
    "for i in range(100):\n    print(f'line {i}', flush=True)\n"
    "for i in range(100, 1000):\n    print(f'line {i}', flush=True); time.sleep(0.05)\n"
)
# the last line plain_loop.py writes, then an end of its own (no torch: quick)
QUICK = "print('JOB steps=20 timed_steps=10 seconds=0.100000 samples_per_s=1600.0', flush=True)\n"
JOB_S = 120.0  # the most a job of these tests takes to start, run and end (a loaded machine)


def job_config(tmp_path: Path, *args: str) -> RunConfig:
    """The configuration of ``python ARGS`` as a job (``gpudash -- python ARGS``)."""
    command = [sys.executable, *args]
    return RunConfig(
        workload=workload_name(command),
        variant=variant(command),
        job=tuple(command),
        watchdog_s=None,
        trace_dir=str(tmp_path / "traces"),
    )


@asynccontextmanager
async def job_dashboard(session: JobSession) -> AsyncIterator[tuple[DashPilot, GpuDashApp]]:
    """The dashboard over ``session`` at SIZE; the job is stopped (or its group ended) afterwards."""
    app = GpuDashApp(session, toasts=False)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await wait_until(pilot, lambda: app.source_ready, "the job to start")
            yield pilot, app
    finally:
        session.stop()


def pane(app: GpuDashApp) -> OutputPane:
    return app.query_one("#job-output", OutputPane)


def drawn(p: OutputPane) -> list[str]:
    """What the pane draws, row by row, as plain text."""
    return [p.render_line(y).text.rstrip() for y in range(p.size.height)]


@pytest.mark.slow
async def test_the_output_pane_shows_the_job_s_lines_and_the_family_keys_say_not_for_a_job(
    tmp_path: Path, short_tmp: Path
) -> None:
    script = short_tmp / "job.py"  # a short path: the header shows the whole command line
    script.write_text(QUICK)
    session = JobSession(job_config(tmp_path, str(script)), capture=True)
    async with job_dashboard(session) as (pilot, app):
        header = shown(app, "#header")
        assert str(script) in header and "job:" not in header  # the command line, not a workload's name
        assert app.check_action("output", ()) and not app.check_action("cycle_variant", ())  # the footer's keys
        await wait_until(pilot, lambda: session.exit_code is not None, "the job to end", JOB_S)
        # a family's keys do nothing but say why; no control goes out
        for key, said in (
            ("v", "not for a job: its settings are its own arguments (Next variant)"),
            ("plus", "not for a job: its settings are its own arguments (Batch size ×2)"),
            ("k", "not for a job: its settings are its own arguments (Knobs panel)"),
            ("space", "not for a job: gpudash cannot pause its loop (space)"),
            ("r", "not for a job: gpudash does not restart it; run its command again (r)"),
        ):
            await pilot.press(key)
            await pilot.pause()
            assert message(app) == said
            assert app.screen is app.screen_stack[0]  # no dialog opened (b, w, k would open one)
        app.refresh_now()
        assert not app.controller.sent and not [e for e in app.state.events if e.what == "control"]
        # o: the job's output in place of the charts and the stats; o again: the charts
        await pilot.press("o")
        await wait_until(pilot, lambda: any("JOB steps=20 " in line for line in drawn(pane(app))), "the job's line")
        assert not app.query_one("#charts").display and not app.query_one("#stats").display
        await pilot.press("o")
        await pilot.pause()
        assert app.query_one("#charts").display and not pane(app).display
        # the job's notes are errors the dashboard shows
        note = "no optimizer step seen yet: is the job training with torch.optim?"
        app.ingest([Event(app.state.time_s, EventKind.ERROR, what="job", message=note)])
        assert message(app) == f"✗ {note}"
        # the palette and the help list what applies to a job only
        titles = palette_titles(app)
        assert "Output of the job (o)" in titles and "Profile 20 steps (torch.profiler window) (T)" in titles
        assert "Next variant (v)" not in titles and not [t for t in titles if t.startswith("Knob:")]
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        help_text = plain_text(app.screen.query_one(Static), 120)
        assert "switch to the next variant" not in help_text and "its output, live" in help_text
        assert help_text.startswith(f"gpudash — your job, live: {app.job.command}")  # type: ignore[union-attr]
        # the keys under short headings, in order, a job's only: nothing to steer
        headings = [h for h in ("Steer the run", "Look closer", "Keep a record", "The screen") if h in help_text]
        assert headings == ["Look closer", "Keep a record", "The screen"]
        assert "same format as gpudash record)" in help_text and "gpudash --record" not in help_text
        await pilot.press("escape")
        await pilot.press("q")  # the job has ended: no question
        await pilot.pause()
        assert not isinstance(app.screen, QuitJobScreen)
    assert app.return_code == 0
    assert job_exit_status(session, 0) == 0


async def test_a_live_job_s_progress_bar_is_replaced_in_place_and_quit_asks_then_s_stops_it(tmp_path: Path) -> None:
    session = JobSession(job_config(tmp_path, "-c", LIVE), capture=True)
    async with job_dashboard(session) as (pilot, app):
        await pilot.press("o")
        await wait_until(pilot, lambda: pane(app).lines == ["red and plain", "20%"], "the bar at 20%", JOB_S)
        rows = drawn(pane(app))
        assert rows[:2] == ["red and plain", "20%"] and "10%" not in rows
        assert not [line for line in pane(app).lines if "\x1b" in line or "\r" in line]
        assert pane(app).following
        # q while it runs: the question; escape stays
        await pilot.press("q")
        await pilot.pause()
        assert isinstance(app.screen, QuitJobScreen)
        assert str(app.screen.query_one("#quit-question").render()) == QUESTION
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, QuitJobScreen) and session.process.poll() is None
        # q, then s: stopped, and the dashboard's own status
        await pilot.press("q")
        await pilot.pause()
        await pilot.press("s")
        await wait_until(pilot, lambda: session.process.poll() is not None, "the job to be stopped", JOB_S)
    assert session.process.stopped_by_gpudash
    assert job_exit_status(session, 0) == 0


@pytest.mark.slow
async def test_the_pane_follows_the_end_until_the_user_scrolls_up_and_end_follows_again(tmp_path: Path) -> None:
    session = JobSession(job_config(tmp_path, "-c", CHATTY), capture=True)
    async with job_dashboard(session) as (pilot, app):
        await pilot.press("o")
        p = pane(app)
        await wait_until(pilot, lambda: len(p.lines) > 110, "the job's first lines", JOB_S)
        await pilot.pause()
        assert p.following and drawn(p)[-1] == p.lines[-1]
        await pilot.press("pageup")
        await wait_until(pilot, lambda: drawn(p)[-1] != p.lines[-1], "the page up")
        await wait_until(pilot, lambda: not app.animator.is_being_animated(p, "scroll_y"), "the scroll's animation")
        await pilot.pause()
        top, seen = drawn(p)[0], len(p.lines)
        await wait_until(pilot, lambda: len(p.lines) > seen + 5, "more lines")
        await pilot.pause()
        assert not p.following and drawn(p)[0] == top  # the view stays where the user took it
        assert "scrolled up" in str(p.border_subtitle)
        await pilot.press("end")
        await pilot.pause()
        assert p.following and drawn(p)[-1] == p.lines[-1]


async def test_l_leaves_the_job_running_after_the_dashboard_quits(tmp_path: Path) -> None:
    session = JobSession(job_config(tmp_path, "-c", LIVE), capture=True)
    pid: int | None = None
    try:
        async with job_dashboard(session) as (pilot, app):
            pid = session.process.pid
            await pilot.press("ctrl+c")
            await pilot.pause()
            assert isinstance(app.screen, QuitJobScreen)
            await pilot.press("l")
            await wait_until(pilot, lambda: not session.alive, "gpudash to let the job go")
        assert pid is not None and session.process.poll() is None  # the stop on the way out left it alone
        os.kill(pid, 0)  # still there
        assert job_exit_status(session, 0) == 0  # gpudash's own status: the job has not ended
    finally:
        if pid is not None:
            with suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
            if session.process.proc is not None:
                session.process.proc.wait(timeout=10)


@dataclass
class EndedJob:
    """What ``run_job`` returned and the dashboard showed once a job that crashed had ended."""

    status: int = -1
    message: str = ""
    status_text: str = ""
    header: str = ""


@pytest.fixture(scope="module")
def crashed_job(tmp_path_factory: pytest.TempPathFactory) -> EndedJob:
    """``plain_loop.py --exit-code 7`` under ``run_job`` (the dashboard headless): it runs 40 steps
    (started: 10 steps in), ends by itself, and the user quits after a few polls more."""
    args = (str(PLAIN_LOOP), "--steps", "40", "--workers", "0", "--exit-code", "7")
    config = job_config(tmp_path_factory.mktemp("crashed-job"), *args)
    seen = EndedJob()

    def dashboard(source: EngineSource, user_config: None) -> int:
        """``entry_points.run_app``'s part, headless: the app until the user quits (once the job has ended)."""
        assert isinstance(source, JobSession)
        app = GpuDashApp(source, toasts=False)

        async def user(pilot: Pilot[object]) -> None:
            await wait_until(pilot, lambda: source.exit_code is not None, "the job to end", JOB_S)
            await pilot.pause()
            seen.message = message(app)
            for _ in range(10):  # polls after the end
                app.refresh_now()
                await pilot.pause()
            seen.status_text, seen.header = app.status_text(), shown(app, "#header")
            await pilot.press("q")

        try:
            return int(app.run(headless=True, size=SIZE, auto_pilot=user) or 0)
        finally:
            source.stop()

    seen.status = run_job(config, None, dashboard)
    return seen


@pytest.mark.slow
def test_the_job_s_exit_status_comes_back_when_it_ended_by_itself(crashed_job: EndedJob) -> None:
    assert "✗ the job exited with code 7 — o shows its output, q quits" in crashed_job.message
    assert crashed_job.status == 7


@pytest.mark.slow
def test_the_header_says_the_job_crashed_and_stays_so(crashed_job: EndedJob) -> None:
    assert crashed_job.status_text == "crashed" and " crashed " in crashed_job.header


@pytest.mark.slow
def test_gpudash_dash_dash_cmd_exits_with_the_job_s_status_from_a_terminal() -> None:
    """``gpudash -- python -c CODE`` in a terminal (a pty), CODE ending with ``sys.exit(7)``: the
    dashboard, the job ends, q, and gpudash's status is the job's."""
    command = [sys.executable, "-m", "gpudash", "--", sys.executable, "-c", QUICK + "import sys; sys.exit(7)\n"]
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", SIZE[1], SIZE[0], 0, 0))
    proc = subprocess.Popen(
        command,
        cwd=ROOT,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env={**os.environ, "TERM": "xterm-256color"},
        start_new_session=True,
    )
    os.close(slave)
    screen, asked, deadline = b"", False, time.monotonic() + JOB_S
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            if select.select([master], [], [], 0.1)[0]:
                with suppress(OSError):  # the terminal closed: gpudash is gone
                    screen += os.read(master, 1 << 16)
            if not asked and b"exited with code 7" in screen:  # the message line
                os.write(master, b"q")
                asked = True
        assert asked, "the dashboard never said that the job exited"
        assert proc.wait(timeout=JOB_S) == 7
    finally:
        os.close(master)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


class LoggedSource(FakeSource):
    """A family's run whose workload writes to a log file."""

    @property
    def info(self) -> SourceInfo:
        return SourceInfo(log_path="/tmp/gpudash-encdec.log", started=self.started_event)


async def test_o_in_a_family_s_run_names_its_log_file() -> None:
    async with running(LoggedSource()) as (pilot, app, _):
        assert not app.check_action("output", ())  # not in the footer
        await pilot.press("o")
        await pilot.pause()
        assert message(app) == "the workload's output goes to its log file: /tmp/gpudash-encdec.log"
        assert app.query_one("#charts").display
        with pytest.raises(NoMatches):  # no pane in a family's run
            app.query_one("#job-output", OutputPane)
