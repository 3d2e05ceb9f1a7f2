"""Would ``textual-plot`` redraw the dashboard's charts within the 25 ms target? (issue 12)

    pip download textual-plot textual-hires-canvas --no-deps -d /tmp/tp
    cd /tmp/tp && for w in *.whl; do unzip -oq $w -d site; done
    PYTHONPATH=/tmp/tp/site .venv/bin/python benchmarks/textual_plot_frame.py [--wall]

Six ``textual_plot.PlotWidget`` charts in the dashboard's grid at 160x48 (and 4 at 100x30), each
redrawn as ``gpudash.tui.charts`` redraws a chart: cleared, two braille lines of one point a
column (what the dashboard keeps after bucket-averaging 600 samples), three change markers
(vertical lines), fixed y limits. Times the canvas build of every chart (``_render_plot``, what
its ``render`` does when the data changed) and one whole frame through Textual's compositor,
like ``benchmarks/tui_frame.py`` does for the plotext charts, and runs that one beside it.
CPU time of this process by default (``time.process_time``: steady on a shared machine);
``--wall`` for wall-clock time. Not a dependency of gpudash.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

try:
    from textual_plot import HiResMode, PlotWidget
except ImportError:  # pragma: no cover - an evaluation tool, not installed with gpudash
    sys.exit("textual-plot is not importable: see this script's docstring")
from textual.app import App, ComposeResult
from textual.containers import Grid


class SixCharts(App[None]):
    CSS = "Grid { grid-size: 2; grid-gutter: 0 1; } PlotWidget { height: 1fr; }"

    def __init__(self, n: int) -> None:
        super().__init__()
        self.n = n

    def compose(self) -> ComposeResult:
        with Grid():
            for _ in range(self.n):
                yield PlotWidget(allow_pan_and_zoom=True)

    def fill(self, shift: float) -> None:
        for plot in self.query(PlotWidget):
            cols = max(10, plot.size.width - 12)
            xs = [150 * i / cols for i in range(cols)]
            plot.clear()
            plot.plot(xs, [200 + 20 * math.sin(x / 7 + shift) for x in xs], line_style="blue",
                      hires_mode=HiResMode.BRAILLE, label="steps/s")
            plot.plot(xs, [160 + 20 * math.cos(x / 5 + shift) for x in xs], line_style="orange1",
                      hires_mode=HiResMode.BRAILLE, label="samples/s")
            for t in (40.0, 80.0, 120.0):
                plot.add_v_line(t, "red", label=f"change at {t:.0f}")
            plot.set_ylimits(0, 300)


def measure(size: tuple[int, int], frames: int = 20,
            clock: Callable[[], float] = time.perf_counter) -> tuple[int, float, float, float]:
    """(charts, median ms to rebuild every canvas, p95 ms, median ms of a whole frame)."""

    async def main() -> tuple[int, float, float, float]:
        app = SixCharts(6 if size[1] >= 40 else 4)
        async with app.run_test(size=size) as pilot:
            app.fill(0.0)
            await pilot.pause()
            plots = list(app.query(PlotWidget))
            build = []
            for i in range(frames):
                a = clock()
                app.fill(i / 10)  # as redraw_charts refills the plotext figures
                for p in plots:
                    p._render_plot()
                build.append((clock() - a) * 1000)
            bare, whole = [], []
            for _ in range(frames):
                a = clock()
                await pilot.pause()
                bare.append((clock() - a) * 1000)
            for i in range(frames):
                a = clock()
                app.fill(i / 10)
                await pilot.pause()
                whole.append((clock() - a) * 1000)
            build.sort()
            return (len(plots), statistics.median(build), build[int(0.95 * (len(build) - 1))],
                    max(0.0, statistics.median(whole) - statistics.median(bare)))

    return asyncio.run(main())


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--wall", action="store_true", help="wall-clock time instead of this process's CPU time")
    clock = time.perf_counter if ap.parse_args().wall else time.process_time
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from benchmarks.tui_frame import redraw_costs

    what = "wall" if clock is time.perf_counter else "CPU"
    for size in ((100, 30), (160, 48)):
        for name, run in (("plotext (gpudash)", redraw_costs), ("textual-plot", measure)):
            n, med, p95, whole = run(size, clock=clock)
            print(f"{name:<18} {n} charts at {size[0]}x{size[1]}: redraw {med:.1f} / {p95:.1f} ms {what} "
                  f"(median / p95), whole frame {whole:.1f} ms (target: redraw <= 25 ms)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
