"""The dashboard's charts: textual-plotext plots fed from ``DashState`` on the redraw timer.

Every chart shows the same time window ``[t0, t1]`` (the shared time axis, zoomed with the
scroll wheel: ``gpudash.tui.timeview``) and a vertical marker with a label at every change
event. Points are bucket-averaged down to about two per terminal column before plotting
(braille gives two dots a column), so the cost of a redraw depends on the chart's size, not
on how long the run is.

Readable without colour (``NO_COLOR``): each line of a chart has its own marker (braille dots,
then ``•``), and the legend in the chart's title names lines by marker and label. A click
shows the values under the cursor (the nearest point of each line) in the chart's tooltip.
"""

from __future__ import annotations

from textual import events
from textual.app import RenderResult
from textual.message import Message
from textual_plotext import PlotextPlot

from gpudash.core.protocol import EventKind
from gpudash.core.textfmt import fmt_num
from gpudash.tui.chart_specs import GREEN, GREY, MAGENTA, RED, ChartSpec
from gpudash.tui.markers import Marker
from gpudash.tui.phase_strip import legend, strip_row, with_strip
from gpudash.tui.plotext_adapter import canvas_columns, column_to_x, plotext_theme_name, render_plot, size_plot
from gpudash.tui.state import DashState
from gpudash.tui.timeview import ZOOM_IN, ZOOM_OUT

MARKER_COLOURS = {
    EventKind.CHANGED: RED,
    EventKind.CRASHED: RED,
    EventKind.STARTED: GREEN,
    EventKind.PAUSED: GREY,
    EventKind.RESUMED: GREY,
    EventKind.STOPPED: GREY,
    EventKind.MEASURED: MAGENTA,
}  # measured: a profiler window (the stretch it traced)


class MetricChart(PlotextPlot):
    """One chart of ``CHARTS`` (``gpudash.tui.chart_specs``); ``update_from`` refills it, the next paint draws it.

    The mouse: a click shows the values under the cursor in the tooltip and posts them as a
    ``Readout``; the wheel posts a ``Zoom`` of the shared time axis around the cursor's time.
    """

    DEFAULT_CSS = """
    MetricChart { height: 1fr; width: 1fr; min-height: 6; }
    """

    class Zoom(Message):
        """Zoom the shared time axis by ``factor`` keeping ``at_s`` in place."""

        def __init__(self, at_s: float, factor: float) -> None:
            super().__init__()
            self.at_s, self.factor = at_s, factor

    class Readout(Message):
        """What a click found under the cursor, in words."""

        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

    def __init__(self, spec: ChartSpec) -> None:
        super().__init__(id=f"chart-{spec.id}", classes="chart")
        self.spec = spec
        self.marker_labels: list[tuple[float, str]] = []  # what the last update drew (for tests)
        self.points_drawn = 0
        self.window: tuple[float, float] = (0.0, 1.0)  # the time span the last update drew
        self._state: DashState | None = None

    def render(self) -> RenderResult:
        """Like ``PlotextPlot.render``, through ``plotext_adapter``'s fast path when it can; a
        job's phase strip as the last row, its legend in the title where it fits."""
        w = self.size.width
        plot = self.plt
        state, (t0, t1) = self._state, self.window
        size_plot(plot, w, self.plot_height)
        plot.theme(plotext_theme_name(self))
        title = self.spec.title
        room = max(8, w - 2)
        key = legend(state.phases, t0, t1, state.time_s, w) if self.strip and state is not None else None
        if key is not None and len(title) + len(key) + 3 <= room:
            title = f"{title} │ {key.plain}"
        plot.title(title if len(title) <= room else title[: room - 1] + "…")
        text, self._fast_render = render_plot(plot, self._fast_render)
        if not self.strip or state is None:
            return text
        columns = canvas_columns(plot) or range(w)
        return with_strip(text, key, strip_row(state.phases, t0, t1, columns, w, state.time_s))

    @property
    def strip(self) -> bool:
        """This chart draws a job's phase strip under it: a chart with ``phases`` of a run with phases."""
        return self.spec.phases and self._state is not None and self._state.phases.active

    @property
    def plot_height(self) -> int:
        """The rows of the plotext figure: the widget's, less the phase strip's."""
        return self.size.height - int(self.strip)

    _fast_render = True  # False once this chart found plotext's internals missing

    # -- the mouse ---------------------------------------------------------------------------------
    def time_at(self, x: int) -> float | None:
        """The time under column ``x`` of this widget (clamped to the plot), or None before the
        chart was drawn or where plotext's matrix does not say where its data columns are."""
        cols = canvas_columns(self.plt)
        return None if cols is None else column_to_x(x, cols, self.window)

    def readout_at(self, t: float) -> str:
        """ "at 12.3 s: ⠒ steps/s 201 · • samples/s 1.61k": each line's point nearest to ``t``."""
        state, (t0, t1) = self._state, self.window
        parts: list[str] = []
        when: float | None = None
        for line in self.spec.lines:
            point = state.series[line.key].nearest(t, t0, t1) if state is not None else None
            if point is not None:
                when = point[0] if when is None else when
                parts.append(f"{line.legend} {fmt_num(point[1] * line.scale)}")
        if when is None:
            return f"{self.spec.title}: no data near {t:.1f} s"
        return f"at {when:.1f} s: " + " · ".join(parts)

    def on_click(self, event: events.Click) -> None:
        t = self.time_at(event.x)
        text = self.readout_at(t) if t is not None else "this chart cannot say where its data columns are"
        self.tooltip = text
        self.post_message(self.Readout(text))

    def on_leave(self, event: events.Leave) -> None:
        self.tooltip = None  # a readout is for where it was clicked

    def on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        self._zoom(event, ZOOM_IN)

    def on_mouse_scroll_down(self, event: events.MouseScrollDown) -> None:
        self._zoom(event, ZOOM_OUT)

    def _zoom(self, event: events.MouseEvent, factor: float) -> None:
        event.stop()
        t = self.time_at(event.x)
        if t is not None:
            self.post_message(self.Zoom(t, factor))

    # -- drawing -----------------------------------------------------------------------------------
    def update_from(self, state: DashState, t0: float, t1: float, note: str | None = None) -> None:
        plt = self.plt
        plt.clear_figure()
        # the theme before any text: a text's background is the canvas colour at the time it is added
        plt.theme(plotext_theme_name(self))
        plt.title(self.spec.title)  # shortened to the width in render()
        plt.xlim(t0, t1)
        self.window, self._state = (t0, t1), state
        width = max(10, self.size.width - 12)
        max_points = width  # plot() joins the points with lines: one a column is enough
        top_left = 0.0
        top_right = 0.0
        drawn = 0
        for line in self.spec.drawing_order:
            xs, ys = state.series[line.key].points(t0, t1, max_points)
            if not xs:
                continue
            if line.scale != 1.0:
                ys = [y * line.scale for y in ys]
            side = "right" if line.right else "left"
            plt.plot(xs, ys, color=line.color, marker=line.marker, yside=side)
            drawn += len(xs)
            if line.right:
                top_right = max(top_right, max(ys))
            else:
                top_left = max(top_left, max(ys))
        self.points_drawn = drawn
        ymax = self.spec.ymax
        if self.spec.id == "memory" and state.last_gpu is not None and state.last_gpu.mem_total_mib:
            ymax = state.last_gpu.mem_total_mib / 1024
        left_top = ymax or _nice_top(top_left)
        rows = self.plot_height - 4  # of the plot itself: less the title, the frame and the time labels
        _axis(plt, left_top, "left", rows)
        if any(line.right for line in self.spec.lines):
            _axis(plt, _nice_top(top_right), "right", rows)
        ticks = _time_ticks(t0, t1, max(2, width // 8))
        plt.xticks([t for t, _ in ticks], [label for _, label in ticks])
        if drawn == 0:
            msg = note or self.spec.empty
            plt.text(msg, x=(t0 + t1) / 2, y=left_top / 2, alignment="center", color=GREY)
        self._draw_markers(state.visible_markers(t0, t1)[-12:], t0, t1, width, left_top)
        self.refresh()

    def _draw_markers(self, markers: list[Marker], t0: float, t1: float, width: int, top: float) -> None:
        """A vertical line at each change, its label on up to three rows near the ``top`` of the
        y axis, each on the first row where it fits (``marker_labels``: those drawn)."""
        plt = self.plt
        self.marker_labels = []
        per_col = (t1 - t0) / max(1, width)  # time per terminal column
        rows = max(1, self.plot_height - 4)  # of the plot: a label a row, on up to three of the top ones
        levels = [(rows - k - 0.5) / rows for k in range(min(3, rows))]
        label_rows: list[list[tuple[float, float]]] = [[] for _ in levels]
        for m in reversed(markers):  # the newest label gets the top row
            colour = MARKER_COLOURS.get(m.kind, RED)
            plt.vertical_line(m.time_s, colour)
            span = (len(m.label) + 1) * per_col
            right = m.time_s > t0 + 0.6 * (t1 - t0)  # near the right edge: the label goes left
            a, b = (m.time_s - span, m.time_s) if right else (m.time_s, m.time_s + span)
            for level, taken in zip(levels, label_rows, strict=False):
                if all(b <= x0 or a >= x1 for x0, x1 in taken):
                    taken.append((a, b))
                    y = top * level
                    if right:
                        plt.text(m.label + " ", x=m.time_s, y=y, color=colour, style="bold", alignment="right")
                    else:
                        plt.text(" " + m.label, x=m.time_s, y=y, color=colour, style="bold", alignment="left")
                    self.marker_labels.append((m.time_s, m.label))
                    break
        self.marker_labels.reverse()


def _axis(plt, top: float, side: str, rows: int) -> None:
    """The y axis from 0 to ``top``; its middle tick only where it has a row of its own (where two
    ticks share a row, which label plotext keeps varies from run to run)."""
    plt.ylim(0, top, yside=side)
    ticks = [0, top / 2, top] if rows >= 3 else [0, top]
    plt.yticks(ticks, [fmt_num(t) if t else "0" for t in ticks], yside=side)


def _fmt_time(t: float, step: float) -> str:
    if step >= 60 or t >= 600:
        m, s = divmod(int(round(t)), 60)
        return f"{m}:{s:02d}"
    return f"{t:.0f}s" if step >= 1 else f"{t:.1f}s"


def _time_ticks(t0: float, t1: float, n: int) -> list[tuple[float, str]]:
    """About ``n`` round time ticks in [t0, t1] (seconds, or m:ss for long spans)."""
    span = max(t1 - t0, 1e-9)
    raw = span / max(1, n)
    step = next(
        (s for s in (0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600) if s >= raw),
        3600 * (1 + int(raw // 3600)),
    )
    if span / step < 2 and step > 0.5:  # at least two ticks
        step = max(0.5, step / 2)
    first = (int(t0 // step) + 1) * step if t0 % step else t0
    out = []
    t = first
    while t <= t1 + 1e-9:
        out.append((t, _fmt_time(t, step)))
        t += step
    return out


def _nice_top(v: float) -> float:
    """A round upper limit a bit above ``v`` (so the axis starts at zero and labels stay short)."""
    if v <= 0:
        return 1.0
    v *= 1.15
    mag = 10 ** len(str(int(v))) / 10 if v >= 1 else 1.0
    for m in (1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10):
        if v <= m * mag:
            return m * mag
    return v
