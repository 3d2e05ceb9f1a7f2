"""The dashboard's charts as a catalog: each chart's heading, lines (metric, legend, colour, marker,
axis) and help, and which charts wait for their first point before they are shown.

Each line of a chart has a marker of its own (braille dots, then ``•``, then ``+``) that its
legend shows, so a chart reads without colour. The widget that draws them: ``gpudash.tui.charts``.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpudash.tui.state import DashState

# plotext colours as RGB, readable on dark and light themes
BLUE = (80, 160, 255)
ORANGE = (255, 160, 40)
GREEN = (80, 200, 120)
MAGENTA = (220, 100, 220)
RED = (240, 70, 70)
YELLOW = (230, 200, 60)
GREY = (150, 150, 150)

BRAILLE = "braille"
DOT = "•"
PLUS = "+"  # a chart's third line
LEGEND_GLYPHS = {BRAILLE: "⠒", DOT: DOT, PLUS: PLUS}  # how the legend shows a line drawn with each marker


@dataclass(frozen=True)
class ChartSpec:
    """One chart of the dashboard: what it is called, which metrics it draws, how to read it."""

    id: str
    heading: str  # before the legend ("step time ms"); a one-line chart shows only this
    lines: tuple[Line, ...]
    ymax: float | None = None  # fixed top of the y axis (percentages)
    empty: str = "waiting for the first sample…"
    help: str = ""
    first_on_top: bool = False  # draw the first line last, over the others where they share a row
    phases: bool = False  # a job's phases in a strip under the chart (``gpudash.tui.phase_strip``)

    @property
    def drawing_order(self) -> tuple[Line, ...]:
        """The lines in the order they are drawn (a later one hides an earlier one where they meet)."""
        return (*self.lines[1:], self.lines[0]) if self.first_on_top and self.lines else self.lines

    @property
    def title(self) -> str:
        """The chart's top line: the heading and, for two lines, which marker is which."""
        if len(self.lines) < 2:
            return self.heading
        two_axes = any(line.right for line in self.lines)
        legend = " · ".join(
            line.legend + (f" ({'right' if line.right else 'left'})" if two_axes else "") for line in self.lines
        )
        return f"{self.heading}: {legend}" if self.heading else legend


@dataclass(frozen=True)
class Line:
    """One line of a chart: the metric it draws, its legend, colour, marker and axis."""

    key: str  # a metric of gpudash.core.metrics with series=True
    label: str  # the legend's name of the line
    color: tuple[int, int, int]
    marker: str = BRAILLE  # plotext marker: each line of a chart has its own
    right: bool = False  # plot against the right-hand y axis
    scale: float = 1.0  # multiply values (e.g. MiB -> GiB)

    @property
    def legend(self) -> str:
        """ "⠒ steps/s (left)": the marker, the label, the axis where the chart has two."""
        return f"{LEGEND_GLYPHS.get(self.marker, self.marker)} {self.label}"


CHARTS: tuple[ChartSpec, ...] = (
    ChartSpec(
        "throughput",
        "",
        (Line("steps_per_s", "steps/s", BLUE), Line("samples_per_s", "samples/s", ORANGE, DOT, right=True)),
        phases=True,
        help="Training steps and samples finished per second, over each sample interval. A job's "
        "phases in the row under it, the one that took most of each column's time: training █, "
        "evaluation ▓, checkpoint ▒, compile ▞, stalled !, startup, teardown and the rest ░.",
    ),
    ChartSpec(
        "step_time",
        "step time ms",
        (Line("step_ms_p50", "p50", GREEN), Line("step_ms_p95", "p95", MAGENTA, DOT)),
        help="Median and 95th percentile of the step times in each interval (CUDA events on a GPU).",
    ),
    ChartSpec(
        "gpu_util",
        "",
        (Line("gpu_util_pct", "kernel-active %", BLUE), Line("mem_bw_util_pct", "mem-bw %", ORANGE, DOT)),
        ymax=100.0,
        help="NVML utilization: the share of time ANY kernel ran (not SM occupancy), and the share "
        "of time device memory was read or written.",
    ),
    ChartSpec(
        "gpm",
        "GPM %",
        (
            Line("sm_active_pct", "SMs busy", GREEN),
            Line("tensor_active_pct", "tensor", MAGENTA, DOT),
            Line("dram_active_pct", "DRAM", YELLOW, PLUS),
        ),
        ymax=100.0,
        empty="no GPM figures (Hopper and newer)",
        first_on_top=True,  # SMs busy over tensor and DRAM where they meet
        help="NVML's GPU performance monitoring: the share of the SMs' time they were busy (unlike "
        "kernel-active %, which counts a kernel that keeps one SM busy as 100%), the SMs' time any "
        "tensor core ran, and the DRAM bandwidth used. Shown where GPM figures flow (Hopper and newer).",
    ),
    ChartSpec(
        "power",
        "",
        (Line("power_w", "power W", YELLOW), Line("sm_clock_mhz", "SM MHz", GREEN, DOT, right=True)),
        help="Board power draw and streaming-multiprocessor clock; a falling clock at high power means throttling.",
    ),
    ChartSpec(
        "memory",
        "GPU memory used GiB (top: total)",
        (Line("mem_used_mib", "used GiB", MAGENTA, scale=1 / 1024),),
        help="Device memory in use on the sampled GPU (all processes); the top is the GPU's total.",
    ),
    ChartSpec(
        "mfu",
        "model FLOPs",
        (Line("tflops", "TFLOP/s", BLUE), Line("mfu_pct", "MFU %", ORANGE, DOT, right=True)),
        empty="no model FLOPs counted",
        help="The step's model FLOPs (counted once per configuration) × steps/s, and that over the GPU's "
        "dense peak for the step's dtype (MFU); the stats panel's border says what was counted and the peak.",
    ),
    ChartSpec(
        "syncs",
        "host-device syncs per step",
        (Line("syncs_per_step", "syncs/step", RED),),
        empty="counted on CUDA only",
        help="Times per step the host waited for the GPU (torch sync debug mode); 0 is the goal.",
    ),
)


# charts shown only once one of their lines has a point: GPM's (Hopper and newer) and the model FLOPs'
WHEN_FLOWING = frozenset({"gpm", "mfu"})


def charts_in_play(specs: tuple[ChartSpec, ...], state: DashState) -> tuple[str, ...]:
    """The ids of the charts with something to draw: every chart but those of ``WHEN_FLOWING``,
    which wait for their first point (a GPU before Hopper has no GPM figures, a run without a FLOPs
    count no MFU: no empty chart for them)."""
    return tuple(
        s.id for s in specs if s.id not in WHEN_FLOWING or any(len(state.series[line.key]) for line in s.lines)
    )
