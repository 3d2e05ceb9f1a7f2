"""``gpudash watch``: the dashboard with no workload of its own. Every watched GPU's line (the
dashboard's ``GpuRows``), the charts of one GPU (``g`` moves them to the next, marked on them),
and a table of the processes on each GPU, from NVML's process lists.

GPM's SM, tensor and DRAM activity (Hopper and newer) show in each GPU's row and, once they flow,
in a chart beside kernel-active %; where GPM is not read, one notice says why.

It is ``GpuDashApp`` over a ``WatchSource`` (``gpudash.watch.source``): the same sampler, rows,
charts, screenshots (``s``), recording (``c``, with a ``gpu`` row per tick), themes, NO_COLOR and
``gpudash serve --watch``; the stats panel (a workload's statistics) is replaced by the process
table, and the keys that steer a workload say that watch runs none.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rich.text import Text
from textual.app import SystemCommand
from textual.binding import Binding
from textual.css.query import NoMatches
from textual.geometry import Size
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Static

from gpudash.arguments.config import UserConfig
from gpudash.core.textfmt import fmt_duration
from gpudash.recording.record import CsvRecorder
from gpudash.tui import actions, entry_points
from gpudash.tui import app as app_module
from gpudash.tui.app import HINT, GpuDashApp
from gpudash.tui.chart_specs import CHARTS, ORANGE, ChartSpec, Line, charts_in_play
from gpudash.tui.charts import MetricChart
from gpudash.tui.gpu_rows import GpuRows
from gpudash.tui.layout import CHART_ROWS, WIDE
from gpudash.tui.screens import HelpScreen, KeyRow
from gpudash.tui.widgets import gpu_line
from gpudash.watch.snapshot import GpuState, Snapshot
from gpudash.watch.source import WatchController, WatchSource

TEMPERATURE = ChartSpec(
    "temperature",
    "GPU temperature °C",
    (Line("temp_c", "°C", ORANGE),),
    help="The GPU's core temperature; a hot GPU throttles its clock (the header says why).",
)
# GPM's chart is shown once it has a point (``charts_in_play``): none on a GPU before Hopper
WATCH_CHARTS: tuple[ChartSpec, ...] = (
    *(c for c in CHARTS if c.id in ("gpu_util", "gpm", "power", "memory")),
    TEMPERATURE,
)
FIXED_ROWS = 4  # header (2), message bar, footer
PROCESS_SHARE = 3  # the process table takes at most a third of the rows (at least MIN_PROCESS_LINES)
MIN_PROCESS_LINES = 3
NOT_HERE = {"Copy stats as Markdown", "Copy stats as CSV"}  # no stats panel in watch


def watch_recorder(path: str, metadata: dict[str, Any]) -> CsvRecorder:
    """``c`` in watch: gpudash's CSV with a ``gpu`` row per NVML tick, metadata without a workload."""
    meta = {k: v for k, v in metadata.items() if k not in ("config", "running_at_start", "device")}
    meta.update(recorded_by="gpudash watch")
    return CsvRecorder(path, meta, gpu_rows=True)


def process_lines(snap: Snapshot | None) -> list[Text]:
    """The process table's lines: a heading, then a row per process (GPU, pid, user, GPU memory,
    command), then the GPUs with none and the throttled ones."""
    if snap is None:
        return [Text("processes: asking NVML…", style="dim")]
    if snap.unavailable is not None:
        return []
    rows: list[tuple[GpuState, Any]] = [(g, p) for g in snap.gpus for p in (g.processes or ())]
    out = [Text.assemble(("processes", "bold"), (" (NVML: compute and graphics, per GPU)", "dim"))]
    if rows:
        out.append(Text(f"{'GPU':>3} {'PID':>8}  {'USER':<12} {'GPU MEM':>9}  COMMAND", style="bold"))
    for g, p in sorted(rows, key=lambda r: (r[0].index, -(r[1].used_memory_mib or 0.0), r[1].pid)):
        mem = "n/a" if p.used_memory_mib is None else f"{p.used_memory_mib / 1024:.2f} GiB"
        line = f"{g.index:>3} {p.pid:>8}  {p.user[:12]:<12} {mem:>9}  {p.command}"
        out.append(Text(line, no_wrap=True, overflow="ellipsis"))
    idle = [str(g.index) for g in snap.gpus if g.processes == ()]
    unknown = [g for g in snap.gpus if g.processes is None]
    notes: list[tuple[str, str]] = []
    if idle:
        notes.append((f"GPU {', '.join(idle)}: no processes", "dim"))
    for g in unknown:
        notes.append((f"GPU {g.index}: processes n/a ({dict(g.failed).get('processes', 'NVML gave none')})", "yellow"))
    for g in snap.gpus:
        if g.throttle:
            notes.append((f"GPU {g.index} throttle: {g.throttle.replace('|', ', ')}", "bold red"))
    if notes:
        out.append(Text(" · ").join(Text(text, style=style) for text, style in notes))
    for t in out:
        t.no_wrap, t.overflow = True, "ellipsis"
    return out


class ProcessTable(Static):
    """The processes on each watched GPU, refreshed every NVML interval."""

    DEFAULT_CSS = """
    ProcessTable { height: auto; padding: 0 1; border-top: solid $panel; text-wrap: nowrap; text-overflow: ellipsis; }
    """

    lines = 0

    def show(self, snap: Snapshot | None, max_lines: int, shown: bool = True) -> None:
        """``snap``'s processes (None: not read yet) in at most ``max_lines``; ``shown`` False:
        hidden (no NVML: the notice says why)."""
        text = process_lines(snap) if shown else []
        self.display = bool(text)
        if len(text) > max_lines:
            cut = len(text) - max_lines + 1
            text = [*text[: max_lines - 1], Text(f"… {cut} more lines (a taller terminal shows them)", style="dim")]
        self.lines = len(text) + 1 if text else 0  # its border
        joined = Text("\n").join(text)
        joined.no_wrap, joined.overflow = True, "ellipsis"  # a long command is cut, not wrapped
        self.update(joined)

    @property
    def text(self) -> str:
        return str(self.render())


class WatchHeader(Static):
    """Two lines: watch, the GPUs, the time, the status, REC; the charted GPU and its figures."""

    DEFAULT_CSS = """
    WatchHeader { height: 2; background: $panel; padding: 0 1; text-wrap: nowrap; text-overflow: ellipsis; }
    """

    def show(self, app: WatchApp) -> None:
        state, info = app.state, app.state.gpu_info
        t = Text(no_wrap=True, overflow="ellipsis")
        t.append(" gpudash watch ", style="bold reverse")
        if info is not None and info.available:
            t.append(f" {len(info.sampled)} GPU{'s' if len(info.sampled) != 1 else ''} watched", style="bold")
            t.append(" · no workload of gpudash's")
        t.append(f" · {fmt_duration(app.run_time_s())}  ")
        status = app.status_text()
        t.append(f" {status} ", style="bold green" if status == "watching" else "bold yellow")
        recording = app.controller.recording.path
        if recording:
            t.append("  ● REC ", style="bold red")
            t.append(os.path.basename(recording), style="red")
        line2 = Text.assemble(("charts: ", "bold"), gpu_line(info, state))
        both = Text("\n").join([t, line2])
        both.no_wrap, both.overflow = True, "ellipsis"
        self.update(both)


class WatchApp(GpuDashApp):
    """The dashboard over every GPU of the box, with no workload of its own."""

    CSS_PATH = str(
        Path(app_module.__file__).with_name("app.tcss")
    )  # the dashboard's (Textual reads it beside its class)
    BINDINGS = [Binding("g", "next_gpu", "Next GPU", tooltip="Chart the next GPU watched")]
    CHART_SPECS = WATCH_CHARTS

    def __init__(self, source: WatchSource, *, maxlen: int = 600, **kw: Any) -> None:
        super().__init__(source, maxlen=maxlen, recorder_factory=watch_recorder, **kw)
        self.controller = WatchController(source, maxlen=maxlen, recorder_factory=watch_recorder)
        self.watch_source = source
        self.snapshot: Snapshot | None = None
        self._reading = False  # a snapshot is being taken in a thread

    # -- layout -----------------------------------------------------------------------------------
    def header_widget(self) -> Widget:
        return WatchHeader(id="header")

    def side_panel(self) -> Widget:
        return ProcessTable(id="processes")

    def on_mount(self) -> None:
        # GpuDashApp.on_mount runs too (Textual calls each class's handler): it starts the source
        self.call_after_refresh(self.say, f"watching every GPU, no workload · g charts the next GPU · {HINT}")
        self.set_interval(self.watch_source.config.gpu_interval_s, self._read_processes)
        self.call_after_refresh(self._read_processes)

    def apply_layout(self, size: Size | None = None) -> None:
        """The charts of the charted GPU in what the rows and the process table leave; without
        NVML, its one-line reason instead."""
        if self.layout_gpu_info != self.state.gpu_info:
            self.refresh_bindings()  # c records once NVML answers (the footer shows it then)
        self.layout_gpu_info = self.state.gpu_info
        self.layout_size = size = size or self.layout_size or self.size
        try:
            rows = self.query_one(GpuRows).lines
            table = self.query_one(ProcessTable)
        except NoMatches:
            return
        gpu = self.gpu_available()
        table.show(self.snapshot if gpu else None, self._table_lines(size), shown=gpu)
        left = size.height - FIXED_ROWS - rows - table.lines
        columns = 2 if size.width >= WIDE else 1
        cells = max(0, left // CHART_ROWS) * columns if gpu else 0
        shown = set(charts_in_play(WATCH_CHARTS, self.state)[:cells])
        for chart in self.query(MetricChart):
            chart.display = chart.spec.id in shown
        grid = self.query_one("#charts")
        grid.display = bool(shown) or not gpu
        grid.styles.grid_size_columns = columns if gpu else 1
        grid.styles.min_height = min(2, cells // columns) * CHART_ROWS if gpu else 3
        notice = self.query_one("#gpu-notice", Static)
        notice.display = not gpu
        notice.set_class(left < CHART_ROWS, "-bare")
        if not gpu:
            info = self.state.gpu_info
            why = (info.unavailable if info is not None else None) or "unknown"
            notice.update(f"No GPU to watch — NVML unavailable: {why}")
        self.call_after_refresh(self.redraw, True)

    # -- drawing ----------------------------------------------------------------------------------
    def redraw(self, force: bool = False) -> None:
        try:
            header = self.query_one(WatchHeader)
            gpu_rows = self.query_one(GpuRows)
        except NoMatches:  # closing
            return
        header.show(self)
        if not self.changed_since_drawn(force):
            return
        height = (self.layout_size or self.size).height
        if gpu_rows.show(self.state.last_gpu, self.state.gpu_info, height=height, stale=not self.gpu_available()):
            self.apply_layout()  # the rows took lines or gave them back: the charts get what is left
        self.redraw_charts()

    def chart_note(self) -> str | None:
        return None

    def status_text(self) -> str:
        return self.controller.status_text()

    # -- the processes ------------------------------------------------------------------------------
    def _read_processes(self) -> None:
        """Take a snapshot in a thread (NVML and /proc may block) and show it when it comes."""
        if self._reading or self.stopping or not self.source_ready or not self.gpu_available():
            return
        self._reading = True

        def work() -> None:
            try:
                snap = self.watch_source.snapshot()
            finally:
                self._reading = False
            self.call_from_thread(self._show_processes, snap)

        self.run_worker(work, thread=True, name="watch-processes", exit_on_error=True)

    def _table_lines(self, size: Size | None = None) -> int:
        """The most lines the process table may take at this terminal's size."""
        return max(MIN_PROCESS_LINES, (size or self.layout_size or self.size).height // PROCESS_SHARE) - 1

    def _show_processes(self, snap: Snapshot) -> None:
        try:
            table = self.query_one(ProcessTable)
        except NoMatches:  # the snapshot came back while the app was closing
            return
        before = table.lines
        self.snapshot = snap
        table.show(snap, self._table_lines(), shown=self.gpu_available())
        if table.lines != before:
            self.apply_layout()

    # -- keys -------------------------------------------------------------------------------------
    def action_next_gpu(self) -> None:
        info = self.state.gpu_info
        if info is None or not info.available or not info.sampled:
            self.say("no GPU to chart: NVML is unavailable", "warning")
            return
        if len(info.sampled) == 1:
            self.say(f"one GPU watched: the charts show GPU {info.sampled[0]}", "warning")
            return
        at = info.sampled.index(info.index) if info.index in info.sampled else -1
        event = self.watch_source.chart(info.sampled[(at + 1) % len(info.sampled)])
        if event is not None:
            self.ingest([event])
            self.redraw(force=True)

    def key_help(self) -> list[KeyRow]:
        shown = [a for a in actions.ACTIONS if a.name == "record" or self.controller.enabled(a.name, a.steers)]
        out = [(a.heading, a.key, a.help) for a in shown]
        out.insert(
            0, (actions.SCREEN, "g", "chart the next GPU watched (the charts follow one GPU; ▶ marks it in the rows)")
        )
        out.append((actions.SCREEN, "ctrl+p", "command palette: every action by name"))
        out.append(
            (actions.SCREEN, "mouse", "click a chart: the values under the cursor · wheel: zoom the time axis (0: all)")
        )
        return sorted(out, key=lambda row: actions.GROUPS.index(row[0]))

    def action_help(self) -> None:
        charts = [(c.title, c.help) for c in self.CHART_SPECS]
        about = "NVML's compute and graphics processes per GPU: pid, user, GPU memory, command"
        charts.append(("processes", f"{about}; ? for a process in another pid namespace"))
        title = "gpudash watch — every GPU of this machine and its processes"
        self.push_screen(HelpScreen(self.key_help(), charts, False, title=title))

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        steering = {a.title for a in actions.ACTIONS if not self.controller.enabled(a.name, a.steers)}
        for command in super().get_system_commands(screen):
            title = command.title.rsplit(" (", 1)[0]
            if title in steering or command.title in NOT_HERE or command.title.startswith("Knob:"):
                continue
            yield command
        yield SystemCommand("Chart the next GPU (g)", "the charts follow one GPU watched", self.action_next_gpu)


def run_watch(interval_s: float, gpus: tuple[int, ...] | None, user_config: UserConfig | None = None) -> int:
    """``gpudash watch``: the dashboard over every watched GPU until the user quits; the exit
    status (an exception is one line naming its log, and 1, as in the dashboard)."""
    return entry_points.run_app(
        WatchSource(interval_s, gpus), user_config, app_class=WatchApp, what="the watch dashboard"
    )
