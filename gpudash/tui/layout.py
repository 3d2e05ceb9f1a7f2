"""Which charts the dashboard shows at a terminal size: a pure function of (columns, rows, GPU).

Top to bottom the screen is the header (2 rows), the message bar (1), the charts, the stats
panel (``STATS_ROWS``: its border, title, column names, a rule and four rows) and the footer
(1). The charts get what is left. Whatever the size, the header, the stats' first row and
the footer stay on screen, and without NVML so does the reason the GPU panel is empty:
charts go first, then the boxed notice becomes a bare paragraph, and only then does the stats
panel shrink to its first row (``STATS_FIRST_ROW``).
"""

from __future__ import annotations

from dataclasses import dataclass

FIXED_ROWS = 4  # header (2), message bar, footer
STATS_ROWS = 8
STATS_FIRST_ROW = 5  # border, title, column names, rule, "now"
CHART_ROWS = 6  # the least a plotext chart is readable in
TALL = 40  # rows from which every chart is shown
WIDE = 60  # columns from which two charts fit side by side

COMPACT_CHARTS = ("throughput", "step_time", "gpu_util", "power")
# with GPM's figures flowing, its chart beside kernel-active % (what "a kernel ran" hides), for power
COMPACT_CHARTS_GPM = ("throughput", "step_time", "gpu_util", "gpm")
COMPACT_CHARTS_NO_GPU = ("throughput", "step_time", "syncs")


@dataclass(frozen=True)
class Layout:
    charts: tuple[str, ...]  # chart ids shown, in grid order
    columns: int  # of the chart grid
    min_rows: int  # the chart grid's least height
    notice: bool  # the "no GPU telemetry" notice is shown (after the charts)
    boxed_notice: bool  # in a bordered cell of the grid; else a bare paragraph
    stats_rows: int | None  # the stats panel's most rows (None: all of it)


def layout_for(width: int, height: int, gpu: bool, all_charts: tuple[str, ...]) -> Layout:
    """The layout for a ``width`` × ``height`` terminal, with or without GPU telemetry
    (``all_charts``: the id of every chart with something to draw, shown from ``TALL`` rows on;
    under that, ``COMPACT_CHARTS``, GPM's chart for power's where it is among them)."""
    columns = 2 if width >= WIDE else 1
    left = height - FIXED_ROWS - STATS_ROWS  # rows for the charts with the whole stats panel
    grid_rows = max(0, left // CHART_ROWS)  # rows of charts that fit
    if gpu:
        compact = COMPACT_CHARTS_GPM if "gpm" in all_charts else COMPACT_CHARTS
        pool = all_charts if height >= TALL else compact
        charts = pool[: grid_rows * columns]  # no more than fit at their least height
        return Layout(charts, columns, CHART_ROWS * min(grid_rows, 2), False, True, None)
    # without NVML the notice takes one cell of the grid, or the whole area when it is small
    cells = grid_rows * columns
    if cells >= 2:
        charts = COMPACT_CHARTS_NO_GPU[: cells - 1]
        return Layout(charts, columns, CHART_ROWS * min(grid_rows, 2), True, True, None)
    return Layout((), 1, 0, True, False, STATS_FIRST_ROW if left < CHART_ROWS else None)


def notice_text(why: str) -> str:
    """The empty GPU panel's words: the reason first, so a small panel still shows it."""
    return f"No GPU charts — NVML unavailable: {why}\nThroughput and step times are measured as usual."
