"""The dashboard of the user's own job (``gpudash -- CMD``): its output pane, its header and its quit.

``JobView`` is what the dashboard adds over a ``JobSession`` (``gpudash.job.session``): the job's
output, live, in a pane that takes the charts' place (key ``o``); a header that names the job's
command line where a family's run names its workload; and, on quit while the job still runs, a
question: stop it, leave it running, or stay. ``run_job`` runs the dashboard over a job and
returns the job's exit status when the job ended by itself, else the dashboard's.

The pane shows the lines the session captured (``JobSession.output``: escape sequences and other
control characters already stripped) and, last, the line being written (a progress bar after
``\\r``, replaced in place), as plain ``Text``: no markup, no escape code reaches the terminal.
It follows the end unless the user has scrolled up (``end`` follows it again).
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.geometry import Size
from textual.screen import ModalScreen
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widgets import Footer, Label

from gpudash.core.protocol import EngineSource, RunConfig
from gpudash.core.textfmt import fmt_duration, strip_controls
from gpudash.job import command as job_command
from gpudash.job.output import safe_line
from gpudash.job.session import JobSession
from gpudash.tui.phase_strip import phase_text
from gpudash.tui.state import DashState
from gpudash.tui.widgets import HeaderFacts, RunHeader, batch_text, gpu_line, mfu_text, recording_text, status_pill

OUTPUT_INTERVAL_S = 0.1  # how often the pane takes the job's new lines (while it is shown)
QUESTION = "The job is still running: s stop it and quit · l leave it running and quit · esc stay"
STOP, LEAVE = "stop", "leave"  # the question's answers (escape: None, stay)
U = TypeVar("U")  # the settings file's type, passed through ``run_job``


class OutputPane(ScrollView, can_focus=True):
    """Lines of text, plain, scrolled: the job's output. ``show`` replaces them all (a bounded
    number, read at most ``1 / OUTPUT_INTERVAL_S`` times a second); only the visible ones are drawn."""

    BINDINGS = [Binding("end", "follow", "Follow the end", show=False)]  # at once, however fast it grows
    DEFAULT_CSS = """
    OutputPane { height: 1fr; border: round $primary; background: $surface; }
    OutputPane:focus { border: round $accent; }
    """

    def __init__(self, *, id: str | None = None, placeholder: str = "") -> None:
        super().__init__(id=id)
        self.lines: list[str] = []
        self.placeholder = placeholder  # drawn, dim, while there are no lines
        self.following = True  # at the end: new lines scroll into view (the user scrolled up: False)

    def show(self, lines: Sequence[str], partial: str = "") -> None:
        """Show ``lines`` and, last, ``partial`` (the line being written; "" for none); the end
        while following it."""
        self.lines = [*lines, partial] if partial else list(lines)
        self.virtual_size = Size(max(map(cell_len, self.lines), default=0), len(self.lines))
        self._follow()
        self.refresh()

    def _follow(self) -> None:
        if self.following:
            self.scroll_end(animate=False, immediate=True, x_axis=False)

    def action_follow(self) -> None:
        self.following = True
        self._follow()

    # the user scrolls up: the view stays where it goes, however soon the next lines come
    def action_scroll_up(self) -> None:
        self.following = False
        super().action_scroll_up()

    def action_page_up(self) -> None:
        self.following = False
        super().action_page_up()

    def action_scroll_home(self) -> None:
        self.following = False
        super().action_scroll_home()

    def on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        self.following = False

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        if self.size.height:  # a scroll of the user's (or ours to the end); none while hidden
            self.following = round(new_value) >= self.max_scroll_y

    def on_resize(self) -> None:
        self._follow()  # shown (it had no size while hidden), or the terminal's size changed

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        width, style = self.size.width, self.rich_style
        index = scroll_y + y
        if not self.lines and y == 0 and self.placeholder:
            return Strip([Segment(self.placeholder, style + Style(dim=True))]).crop_extend(0, width, style)
        if index >= len(self.lines):
            return Strip.blank(width, style)
        text = Text(strip_controls(self.lines[index]), no_wrap=True, end="")
        text.stylize(style)
        strip = Strip(text.render(self.app.console), text.cell_len)
        return strip.crop_extend(scroll_x, scroll_x + width, style)


class JobHeader(RunHeader):
    """Two lines: the job's status, MFU and command line (REC while recording); its batch, device,
    time and pid, its phase now and goodput, and the GPU."""

    def __init__(self, view: JobView, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.view = view

    def lines(self, state: DashState, facts: HeaderFacts) -> tuple[Text, Text]:
        t = Text(no_wrap=True, overflow="ellipsis")
        t.append(" gpudash ", style="bold reverse")
        t.append(" ")
        t.append_text(status_pill(facts.status))
        t.append_text(recording_text(facts.recording))
        t.append_text(mfu_text(state))  # counted over one of its steps, eagerly
        t.append("  ")
        room = self.size.width - 2 - t.cell_len  # last, cut from the middle: the script's name stays
        shown = job_command.short_display(self.view.session.command, room) if room > 0 else self.view.command
        t.append(shown, style="bold")
        pid = self.view.session.process.pid
        line2 = Text.assemble(
            ("batch ", "bold"),
            batch_text(state.run.batch_size),
            f" · {facts.device} · {fmt_duration(facts.run_time_s)}",
            f" · pid {pid}" if pid else "",
            phase_text(state.phases, facts.run_time_s),  # the phase now, for how long, and goodput
            " · ",
            gpu_line(state.gpu_info, state),
        )
        return t, line2


class QuitJobScreen(ModalScreen[str | None]):
    """Quit while the job runs? ``s`` stop it and quit, ``l`` leave it running and quit, escape stay."""

    BINDINGS = [
        Binding("s", f"choose('{STOP}')", "Stop it and quit"),
        Binding("l", f"choose('{LEAVE}')", "Leave it running and quit"),
        Binding("escape", "choose('')", "Stay"),
    ]
    DEFAULT_CSS = """
    QuitJobScreen { align: center middle; }
    QuitJobScreen > Vertical { width: auto; max-width: 95%; height: auto; border: thick $warning;
                               background: $surface; padding: 1 2; }
    """

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(QUESTION, id="quit-question")

    def action_choose(self, choice: str) -> None:
        self.dismiss(choice or None)


class JobView:
    """What the dashboard adds over a job: ``mount`` (the pane, its timer, the hint), ``toggle``
    (the pane in place of the charts, or the charts again), ``layout`` (after the app's own),
    ``asks_first`` (before quitting)."""

    def __init__(self, session: JobSession) -> None:
        self.session = session
        self.command = job_command.display(session.command)
        self.pane = OutputPane(id="job-output", placeholder="the job has written nothing yet")
        self.pane.display = False
        self.shown = False  # the pane is in place of the charts
        self._app: App[Any] | None = None
        self._relayout: Callable[[], None] = lambda: None
        self._drawn = -1  # the session's output_version the pane shows

    @staticmethod
    def of(source: EngineSource) -> JobView | None:
        """The view of ``source`` when it is a job; None for any other run."""
        return JobView(source) if isinstance(source, JobSession) else None

    def header(self) -> JobHeader:
        return JobHeader(self, id="header")

    def mount(self, app: App[Any], say: Callable[[str], None], relayout: Callable[[], None]) -> None:
        """Into ``app`` (its on_mount): the pane above the footer, its timer, the title and the
        hint; ``relayout`` lays the screen out again (the charts back when the pane goes)."""
        self._app, self._relayout = app, relayout
        app.title = f"gpudash -- {self.command}"
        app.mount(self.pane, before=app.query_one(Footer))
        app.set_interval(OUTPUT_INTERVAL_S, self.update)
        app.call_after_refresh(say, "your job: o shows its output · ? help · ctrl+p all commands")

    @property
    def running(self) -> bool:
        """The job's process was started and has not ended (gpudash has not left it either)."""
        s = self.session
        return s.alive and s.process.pid is not None and s.process.poll() is None

    def toggle(self) -> None:
        """The pane in place of the charts and the stats, focused (arrows scroll it), or the charts again."""
        self.shown = not self.shown
        self.pane.display = self.shown
        self.update(force=True)
        self._relayout()
        if self.shown:
            self.pane.focus()
        elif self._app is not None:
            self._app.set_focus(None)

    def layout(self, app: App[Any]) -> None:
        """After the app's layout: while the pane is shown, the charts and the stats give it their place."""
        if self.shown:
            app.query_one("#charts").display = False
        app.query_one("#stats").display = not self.shown

    def update(self, force: bool = False) -> None:
        """The job's new lines into the pane (while it is shown)."""
        s = self.session
        version = s.output_version
        if not self.shown:
            return
        if version == self._drawn and not force:
            self._subtitle()  # the user may have scrolled
            return
        try:
            lines = list(s.output)
        except RuntimeError:  # the reader thread added lines while they were copied: the next tick takes them
            return
        self._drawn = version
        self.pane.show(lines, safe_line(s.partial.rstrip("\r")))
        self._subtitle()

    def _subtitle(self) -> None:
        pane = self.pane
        pane.border_title = f"output of {self.command}"
        n = len(pane.lines)
        where = "following the end" if pane.following else "scrolled up: end follows again"
        ended = "" if self.session.exit_code is None else f" · the job exited with code {self.session.exit_code}"
        pane.border_subtitle = f"{n} line{'s' if n != 1 else ''}{ended} · {where} · o: the charts"

    def asks_first(self, quit_now: Callable[[], Awaitable[None]]) -> bool:
        """Before quitting: while the job runs, ask whether to stop it or leave it running (or stay),
        then ``quit_now``; True when it asks (or is asking), False when the app may quit at once."""
        app = self._app
        if app is None or not self.running:
            return False
        if isinstance(app.screen, QuitJobScreen):
            return True

        async def answered(choice: str | None) -> None:
            if choice is None:
                return
            if choice == LEAVE and self.running:  # ended meanwhile: quitting stops nothing, its status is kept
                self.session.leave_running()
            await quit_now()

        app.push_screen(QuitJobScreen(), answered)
        return True


def job_exit_status(session: JobSession, dashboard: int) -> int:
    """The job's exit status where it ended by itself; the dashboard's own where gpudash stopped
    it or left it running."""
    code = session.exit_code
    return code if code is not None and not session.process.stopped_by_gpudash else dashboard


def run_job(config: RunConfig, user_config: U, run: Callable[[EngineSource, U], int]) -> int:
    """The dashboard (``run``: ``entry_points.run_app``) over the job of ``config``, its output captured
    for the pane; the job's exit status where it ended by itself, else the dashboard's."""
    session = JobSession(config, capture=True)
    code = job_exit_status(session, run(session, user_config))
    if session.left:
        print(
            f"gpudash: the job goes on (pid {session.process.pid}); its output: {session.process.output_path}",
            file=sys.stderr,
        )
    return code
