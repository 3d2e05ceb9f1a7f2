"""The dashboard's charts: textual-plotext plots fed from ``DashState`` on the redraw timer.

Every chart shows the same time window ``[t0, t1]`` (the shared time axis) and a vertical
marker with a label at every change event. Points are bucket-averaged down to about two
per terminal column before plotting (braille gives two dots a column), so the cost of a
redraw depends on the chart's size, not on how long the run is.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.app import RenderResult
from textual_plotext import PlotextPlot

from gpudash.protocol import EventKind
from gpudash.stats import DashState, Marker
from gpudash.tui.plotext_adapter import render_plot, size_plot

# plotext colours as RGB, readable on dark and light themes
BLUE = (80, 160, 255)
ORANGE = (255, 160, 40)
GREEN = (80, 200, 120)
MAGENTA = (220, 100, 220)
RED = (240, 70, 70)
YELLOW = (230, 200, 60)
GREY = (150, 150, 150)

MARKER_COLOURS = {EventKind.CHANGED: RED, EventKind.CRASHED: RED, EventKind.STARTED: GREEN,
                  EventKind.PAUSED: GREY, EventKind.RESUMED: GREY, EventKind.STOPPED: GREY,
                  EventKind.MEASURED: MAGENTA}  # measured: a profiler window (the stretch it traced)


@dataclass(frozen=True)
class Line:
    key: str  # a metric of gpudash.metrics with series=True
    color: tuple[int, int, int]
    right: bool = False  # plot against the right-hand y axis
    scale: float = 1.0  # multiply values (e.g. MiB -> GiB)


@dataclass(frozen=True)
class ChartSpec:
    id: str
    title: str
    lines: tuple[Line, ...]
    ymax: float | None = None  # fixed top of the y axis (percentages)
    empty: str = "waiting for the first sample…"
    help: str = ""


CHARTS: tuple[ChartSpec, ...] = (
    ChartSpec(
        "throughput",
        "steps/s (blue, left) · samples/s (orange, right)",
        (Line("steps_per_s", BLUE), Line("samples_per_s", ORANGE, right=True)),
        help="Training steps and samples finished per second, over each sample interval.",
    ),
    ChartSpec(
        "step_time",
        "step time ms: p50 (green) · p95 (magenta)",
        (Line("step_ms_p50", GREEN), Line("step_ms_p95", MAGENTA)),
        help="Median and 95th percentile of the step times in each interval (CUDA events on a GPU).",
    ),
    ChartSpec(
        "gpu_util",
        "kernel-active % (blue) · mem-bw % (orange)",
        (Line("gpu_util_pct", BLUE), Line("mem_bw_util_pct", ORANGE)),
        ymax=100.0,
        help="NVML utilization: the share of time ANY kernel ran (not SM occupancy), and the share "
        "of time device memory was read or written.",
    ),
    ChartSpec(
        "power",
        "power W (yellow, L) · SM MHz (green, R)",
        (Line("power_w", YELLOW), Line("sm_clock_mhz", GREEN, right=True)),
        help="Board power draw and streaming-multiprocessor clock; a falling clock at high power "
        "means throttling.",
    ),
    ChartSpec(
        "memory",
        "GPU memory used GiB (top: total)",
        (Line("mem_used_mib", MAGENTA, scale=1 / 1024),),
        help="Device memory in use on the sampled GPU (all processes); the top is the GPU's total.",
    ),
    ChartSpec(
        "syncs",
        "host-device syncs per step",
        (Line("syncs_per_step", RED),),
        empty="counted on CUDA only",
        help="Times per step the host waited for the GPU (torch sync debug mode); 0 is the goal.",
    ),
)


class MetricChart(PlotextPlot):
    """One chart of ``CHARTS``; ``update_from`` refills it, the next paint draws it."""

    DEFAULT_CSS = """
    MetricChart { height: 1fr; width: 1fr; min-height: 6; }
    """

    def __init__(self, spec: ChartSpec) -> None:
        super().__init__(id=f"chart-{spec.id}", classes="chart")
        self.spec = spec
        self.marker_labels: list[tuple[float, str]] = []  # what the last update drew (for tests)
        self.points_drawn = 0

    def render(self) -> RenderResult:
        """Like ``PlotextPlot.render``, through ``plotext_adapter``'s fast path when it can."""
        w, h = self.size.width, self.size.height
        plot = self._plot
        size_plot(plot, w, h)
        plot.theme(self._get_plotext_theme_name(self.app.theme))
        title = self.spec.title
        room = max(8, w - 2)
        plot.title(title if len(title) <= room else title[: room - 1] + "…")
        text, self._fast_render = render_plot(plot, self._fast_render)
        return text

    _fast_render = True  # False once this chart found plotext's internals missing

    def update_from(self, state: DashState, t0: float, t1: float, note: str | None = None) -> None:
        plt = self.plt
        plt.clear_figure()
        plt.title(self.spec.title)  # shortened to the width in render()
        plt.xlim(t0, t1)
        width = max(10, self.size.width - 12)
        max_points = width  # plot() joins the points with lines: one a column is enough
        top_left = 0.0
        top_right = 0.0
        drawn = 0
        for line in self.spec.lines:
            xs, ys = state.series[line.key].points(t0, t1, max_points)
            if not xs:
                continue
            if line.scale != 1.0:
                ys = [y * line.scale for y in ys]
            side = "right" if line.right else "left"
            plt.plot(xs, ys, color=line.color, marker="braille", yside=side)
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
        _axis(plt, left_top, "left")
        if any(line.right for line in self.spec.lines):
            _axis(plt, _nice_top(top_right), "right")
        ticks = _time_ticks(t0, t1, max(2, width // 8))
        plt.xticks([t for t, _ in ticks], [label for _, label in ticks])
        if drawn == 0:
            msg = note or self.spec.empty
            plt.text(msg, x=(t0 + t1) / 2, y=left_top / 2, alignment="center", color=GREY)
        self.marker_labels = []
        markers: list[Marker] = state.visible_markers(t0, t1)[-12:]
        # labels go on up to three rows near the top, each on the first row where it fits
        per_col = (t1 - t0) / max(1, width)  # time per terminal column
        rows: list[list[tuple[float, float]]] = [[], [], []]
        levels = (0.97, 0.84, 0.71)
        for m in reversed(markers):  # the newest label gets the top row
            colour = MARKER_COLOURS.get(m.kind, RED)
            plt.vertical_line(m.time_s, colour)
            span = (len(m.label) + 1) * per_col
            right = m.time_s > t0 + 0.6 * (t1 - t0)  # near the right edge: the label goes left
            a, b = (m.time_s - span, m.time_s) if right else (m.time_s, m.time_s + span)
            for level, taken in zip(levels, rows):
                if all(b <= x0 or a >= x1 for x0, x1 in taken):
                    taken.append((a, b))
                    y = left_top * level
                    if right:
                        plt.text(m.label + " ", x=m.time_s, y=y, color=colour, alignment="right")
                    else:
                        plt.text(" " + m.label, x=m.time_s, y=y, color=colour, alignment="left")
                    self.marker_labels.append((m.time_s, m.label))
                    break
        self.marker_labels.reverse()
        self.refresh()


def _axis(plt, top: float, side: str) -> None:
    from gpudash.textfmt import fmt_num

    plt.ylim(0, top, yside=side)
    plt.yticks([0, top / 2, top], ["0", fmt_num(top / 2), fmt_num(top)], yside=side)


def _fmt_time(t: float, step: float) -> str:
    if step >= 60 or t >= 600:
        m, s = divmod(int(round(t)), 60)
        return f"{m}:{s:02d}"
    return f"{t:.0f}s" if step >= 1 else f"{t:.1f}s"


def _time_ticks(t0: float, t1: float, n: int) -> list[tuple[float, str]]:
    """About ``n`` round time ticks in [t0, t1] (seconds, or m:ss for long spans)."""
    span = max(t1 - t0, 1e-9)
    raw = span / max(1, n)
    step = next((s for s in (0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600)
                 if s >= raw), 3600 * (1 + int(raw // 3600)))
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
