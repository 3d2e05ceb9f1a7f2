"""The gpudash dashboard: a Textual app over an ``EngineSource`` (live engine or a replayed CSV).

The app renders a ``DashController`` (the Textual-free owner of run state) and forwards
keys to it. Threading: ``source.start()``, ``restart()`` and ``stop()`` may block (process
spawn, joins), so they run in thread workers that only hand results back through
``call_from_thread``; ``controller.poll()`` never blocks and runs on a 10 Hz timer on the
app's thread. A separate timer redraws the visible charts 3 times a second, and only when
something changed: data rate is not frame rate.

Torch is never imported here: the first frame does not wait for the child's torch import.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import ClassVar

from textual import events
from textual.app import ComposeResult
from textual.containers import Container
from textual.css.query import NoMatches
from textual.geometry import Size
from textual.widget import Widget
from textual.widgets import Static
from textual.worker import WorkerFailed

from gpudash.arguments.config import UserConfig
from gpudash.core.protocol import EngineSource, GpuInfo, Message
from gpudash.tui import actions
from gpudash.tui.chart_specs import CHARTS, ChartSpec, charts_in_play
from gpudash.tui.charts import MetricChart
from gpudash.tui.controller import DashController
from gpudash.tui.crash import report_crash
from gpudash.tui.dash_recording import RecorderFactory
from gpudash.tui.footer import LeanFooter
from gpudash.tui.gpu_rows import GpuRows
from gpudash.tui.job_view import JobView
from gpudash.tui.layout import layout_for, notice_text
from gpudash.tui.notices import STARTING, Notice
from gpudash.tui.palette import PaletteApp
from gpudash.tui.render_cache import bound_render_ansi
from gpudash.tui.state import Status
from gpudash.tui.stats_panel import StatsPanel
from gpudash.tui.timeview import TimeView
from gpudash.tui.user_settings import keep_user_settings
from gpudash.tui.widgets import HeaderFacts, MessageBar, RunHeader

HINT = "? help · ctrl+p all commands"


class GpuDashApp(PaletteApp):
    """Live charts of a training workload, its controls, and the before/after of every change."""

    CSS_PATH = "app.tcss"
    TITLE = "gpudash"
    ENABLE_COMMAND_PALETTE = True
    BINDINGS = actions.bindings()
    CHART_SPECS: ClassVar[tuple[ChartSpec, ...]] = CHARTS  # the charts, in order

    def __init__(
        self,
        source: EngineSource,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], datetime] = datetime.now,
        recorder_factory: RecorderFactory | None = None,
        maxlen: int = 600,
        poll_interval_s: float = 0.1,
        redraw_interval_s: float = 0.33,
        toasts: bool = True,
        save_dir: str | None = None,
        user_config: UserConfig | None = None,
    ) -> None:
        super().__init__()
        bound_render_ansi()  # Textual's escape-code cache kept a style per screen position (render_cache)
        self.user_config = user_config  # the settings file: its theme is applied and kept (None: not used)
        self.controller = DashController(source, maxlen=maxlen, recorder_factory=recorder_factory)
        self.source = source
        self.job = JobView.of(source)  # the user's own command (gpudash -- CMD): its output pane, its quit
        self.replay = self.controller.replay
        self.clock, self.wall_clock = clock, wall_clock
        self.poll_interval_s, self.redraw_interval_s = poll_interval_s, redraw_interval_s
        self.toasts = toasts
        self.stopping = False
        self.layout_gpu_info: GpuInfo | None = None
        self._layout_charts: tuple[str, ...] = ()  # the charts with something to draw, as the layout took them
        self.layout_size: Size | None = None  # the terminal's, as the last resize said
        self._drawn_version = -1
        self._drawn_size: tuple[tuple[int, int], ...] | None = None
        self._t0 = clock()
        self.first_frame_at: float | None = None
        self.redraws = 0
        self.crash_line: str | None = None  # an exception nothing caught: the one line to print on exit
        self.save_dir = save_dir  # screenshots go here (the config's record directory); None: the cwd
        self.view = TimeView()  # the charts' time window: the whole run, or zoomed with the wheel

    # -- layout -----------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield self.header_widget()
        yield MessageBar(id="messages")
        yield GpuRows(id="gpu-rows")
        with Container(id="charts"):
            for spec in self.CHART_SPECS:
                yield MetricChart(spec)
            yield Static(id="gpu-notice")
        yield self.side_panel()
        yield LeanFooter(compact=True, show_command_palette=False)

    def header_widget(self) -> Widget:
        """The line above the charts (``gpudash watch`` has its own)."""
        return self.job.header() if self.job is not None else RunHeader(id="header")

    def side_panel(self) -> Widget:
        """What stands beside the charts: the stats (``gpudash watch``: its process table)."""
        return StatsPanel(id="stats")

    def on_mount(self) -> None:
        path = self.controller.info.path or "a recording"
        self.say(f"replaying {path} (read-only) · {HINT}" if self.replay else f"{STARTING} · {HINT}")
        self.apply_layout()
        self.redraw(force=True)
        self.call_after_refresh(self._first_frame)
        self.set_interval(self.poll_interval_s, self._drain)
        self.set_interval(self.redraw_interval_s, self.redraw)
        # after the first frame: a replay's reading (or a child's spawn) must not hold it up
        self.call_after_refresh(self._in_thread, self.source.start, "start-source", "could not start")
        if self.user_config is not None:
            keep_user_settings(self, self.say, self.user_config)
        if self.job is not None:
            self.job.mount(self, self.say, self.apply_layout)

    def _first_frame(self) -> None:
        if self.first_frame_at is None:
            self.first_frame_at = time.perf_counter()

    def on_resize(self, event: events.Resize) -> None:
        self.apply_layout(event.size)  # the app's own size may not have caught up yet
        self.redraw(force=True)

    def gpu_available(self) -> bool:
        info = self.state.gpu_info
        return info is None or info.available

    def apply_layout(self, size: Size | None = None) -> None:
        """Charts, the GPU notice and the stats panel for the terminal's size (``gpudash.tui.layout``)."""
        self.layout_gpu_info = self.state.gpu_info
        self.layout_size = size = size or self.layout_size or self.size
        rows = self.query_one(GpuRows).lines  # the per-GPU rows' lines come off the charts' share
        self._layout_charts = charts_in_play(self.CHART_SPECS, self.state)  # GPM's and MFU's once they have figures
        layout = layout_for(size.width, size.height - rows, self.gpu_available(), self._layout_charts)
        for chart in self.query(MetricChart):
            chart.display = chart.spec.id in layout.charts
        grid = self.query_one("#charts")
        grid.display = bool(layout.charts) or layout.notice
        grid.styles.grid_size_columns, grid.styles.min_height = layout.columns, layout.min_rows
        self.query_one(StatsPanel).styles.max_height = layout.stats_rows
        notice = self.query_one("#gpu-notice", Static)
        notice.display = layout.notice
        notice.set_class(not layout.boxed_notice, "-bare")
        if layout.notice:
            info = self.state.gpu_info
            notice.update(notice_text((info.unavailable if info is not None else None) or "unknown"))
        if self.job is not None:  # its output pane in the charts' place while it is shown
            self.job.layout(self)
        self.call_after_refresh(self.redraw, True)  # the charts at the sizes this layout gives them

    @property
    def visible_charts(self) -> list[MetricChart]:
        return [c for c in self.query(MetricChart) if c.display]

    # -- the source -------------------------------------------------------------------------------
    def _in_thread(self, call: Callable[[], None], name: str, failure: str) -> None:
        """Run a blocking source call (start, restart) in a thread; report back on this one."""

        def work() -> None:
            try:
                call()
            except Exception as exc:  # noqa: BLE001 - shown to the user, the UI stays up
                self.call_from_thread(self.tell, [self.controller.source_failed(f"{failure}: {exc}")])
                return
            self.call_from_thread(self._source_started)

        # the source's own failure is told above; one in the callbacks is the app's: it exits (crash_line)
        self.run_worker(work, thread=True, name=name, exit_on_error=True)

    def _source_started(self) -> None:
        if not self.stopping:  # quitting: the source is being stopped, nothing more to read
            self._after_poll(self.controller.source_started())

    def _drain(self) -> None:
        if not self.stopping:
            self._after_poll(self.controller.poll())

    def _after_poll(self, notices: list[Notice]) -> None:
        charts = charts_in_play(self.CHART_SPECS, self.state)
        if self.state.gpu_info != self.layout_gpu_info or charts != self._layout_charts:
            self.apply_layout()  # NVML answered (or said why not), GPM or MFU figures came: charts or the notice
        self.tell(notices)
        if notices:
            self.refresh_bindings()

    def refresh_now(self) -> None:
        """Drain the source and redraw everything at once (tests, snapshots, benchmarks)."""
        self._drain()
        self.redraw(force=True)

    @property
    def source_ready(self) -> bool:
        return self.controller.ready

    def ingest(self, messages: Iterable[Message]) -> None:
        """Feed messages as if the source sent them (tests, benchmarks; app thread only)."""
        self._after_poll(self.controller.ingest(messages))

    # -- drawing --------------------------------------------------------------------------------
    def run_time_s(self) -> float:
        if self.replay:
            return self.state.time_s
        return max(self.state.time_s, self.clock() - self._t0)

    def status_text(self) -> str:
        return self.controller.status_text()

    def redraw(self, force: bool = False) -> None:
        try:
            header = self.query_one(RunHeader)
            stats = self.query_one(StatsPanel)
            gpu_rows = self.query_one(GpuRows)
        except NoMatches:  # closing: the widgets are gone before the timers stop
            return
        path = self.controller.info.path
        facts = HeaderFacts(
            device=self.state.device,
            run_time_s=self.run_time_s(),
            status=self.status_text(),
            recording=self.controller.recording.path,
            source_label=os.path.basename(path) if self.replay and path else None,
            knobs=self.controller.knobs.label(),
        )
        header.show(self.state, facts)
        if not self.changed_since_drawn(force):
            return
        height = (self.layout_size or self.size).height
        stale = not self.replay and not self.gpu_available()
        ranks = self.controller.config.nproc
        if gpu_rows.show(self.state.last_gpu, self.state.gpu_info, height=height, stale=stale, ranks=ranks):
            self.apply_layout()  # the rows took lines or gave them back: the charts get what is left
        self.redraw_charts()
        stats.show(
            self.state,
            last_trace=self.controller.last_trace_text(),
            ranks=self.controller.ranks_text(),
            diagnosis=self.controller.diagnosis_text(),
        )

    def changed_since_drawn(self, force: bool = False) -> bool:
        """Whether the charts are to be drawn again: the state or a chart's size changed since they
        were last drawn (or ``force``); what they are drawn at now is noted."""
        size = tuple((c.size.width, c.size.height) for c in self.visible_charts)
        if not force and self.state.version == self._drawn_version and size == self._drawn_size:
            return False
        self._drawn_version, self._drawn_size = self.state.version, size
        return True

    def redraw_charts(self) -> None:
        t0, t1 = self.view.window(*self.state.time_range())
        note = self.chart_note()
        for chart in self.visible_charts:
            chart.update_from(self.state, t0, t1, note=note)
        self.redraws += 1

    def chart_note(self) -> str | None:
        """What an empty chart says instead of "waiting for the first sample…", when it knows better."""
        if not self.replay:
            return STARTING if self.state.status == Status.STARTING else None
        info = self.controller.info
        if info.loading:
            return info.loading
        if self.source_ready and not self.source.alive and self.state.last_sample is None:
            return "no samples in this recording"
        return None

    # -- controls: the steering keys are SteeringApp's ---------------------------------------------
    def action_restart(self) -> None:
        notice = self.controller.begin_restart()
        self.tell([notice])
        if notice is not None and self.state.status == Status.STARTING:
            self._in_thread(self.source.restart, "restart-source", "restart failed")

    # -- the mouse: readouts and the time zoom ----------------------------------------------------
    def on_metric_chart_readout(self, message: MetricChart.Readout) -> None:
        self.say(message.text)

    def on_metric_chart_zoom(self, message: MetricChart.Zoom) -> None:
        span = self.state.time_range()
        self.view.zoom(message.at_s, message.factor, *span)
        self.say(self.view.describe(*span))
        self.redraw(force=True)

    def action_reset_zoom(self) -> None:
        self.view.reset()
        self.say(self.view.describe(*self.state.time_range()))
        self.redraw(force=True)

    def unhandled_exception(self, error: Exception) -> None:
        """An exception nothing caught: Textual exits with status 1; its traceback goes to a log
        file instead of the terminal (``QuietCrashApp``), and ``crash_line`` (printed by
        ``entry_points.run_app``) says where."""
        if self.crash_line is None:
            cause = error.error if isinstance(error, WorkerFailed) else error  # a thread's: its own exception
            try:
                where = self.controller.info.path or "a live run"
            except Exception:  # noqa: BLE001 - the source may be what failed
                where = "?"
            self.crash_line = report_crash(cause, f"source: {where}")

    async def action_quit(self) -> None:
        if self.job is None or not self.job.asks_first(self.quit_now):  # a job still running: ask first
            await self.quit_now()

    async def quit_now(self) -> None:
        if self.stopping:
            return
        self.stopping = True
        if self.controller.recording.recorder is not None:
            self.tell([self.controller.recording.stop(f"saved {self.controller.recording.path}")])
        if self.tune_job is not None and self.tune_job.running:
            self.say("stopping the tune…")
            await self.run_worker(self.tune_job.close, thread=True, name="stop-tune", exit_on_error=False).wait()
        self.say("stopping the workload…")
        worker = self.run_worker(self.source.stop, thread=True, name="stop-source", exit_on_error=False)
        await worker.wait()
        self.exit(0)
