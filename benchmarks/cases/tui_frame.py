"""Dashboard timings on this machine: time to first frame, and the cost of one redraw.

Measures the import of ``gpudash.tui.app`` in a fresh interpreter (what the first frame waits for);
app construction to first frame painted, in process (headless driver); the whole process in a
pseudo-terminal, ``python -m gpudash.tui.demo`` and the real ``gpudash`` (engine on this machine's
CPU or GPU), exec to the first full frame (the footer drawn), and whether torch was still loading
in the child then (``whole_process=false`` skips them); one redraw of every visible chart at full
buffers (600 points a series), building the plotext canvases, at 100x30 (4 charts) and 160x48 (6
charts), and one whole frame (state to charts to Textual's compositor). Targets: first frame
≤ 1.5 s, redraw ≤ 25 ms."""

from __future__ import annotations

import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.cases.shared.terminal import ROOT, child_torch_state, pty_first_frame
from benchmarks.harness.context import Run
from benchmarks.harness.params import param

Row = tuple[str, str, str]  # (measure, result, target)


@dataclass(frozen=True)
class Params:
    whole_process: bool = param(True, "also time the whole process in a pseudo-terminal (the demo, gpudash)")
    tries: int = param(3, "the startup timings' tries, the best kept (the import, the first frames)")
    frames: int = param(20, "frames timed in each redraw measure, at each size")


def fresh_import_s() -> float:
    code = "import time; t=time.perf_counter(); import gpudash.tui.app; print(time.perf_counter()-t)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    return float(out.stdout.strip())


def in_process_first_frame_s() -> float:
    from gpudash.tui.app import GpuDashApp
    from gpudash.tui.demo import SyntheticSource

    async def main() -> float:
        t0 = time.perf_counter()
        app = GpuDashApp(SyntheticSource(gpu=True), toasts=False)
        async with app.run_test(size=(120, 36)) as pilot:
            while app.first_frame_at is None:
                await pilot.pause(0.001)
            return app.first_frame_at - t0

    return asyncio.run(main())


async def filled(app: Any, src: Any, pilot: Any, t: list[float]) -> None:
    """Every buffer of ``app`` full: 600 samples (150 s at 4/s) and 600 GPU ticks (300 s at 2/s)."""
    from gpudash.core.protocol import SetBatchSize

    while not app.source_ready:
        await pilot.pause(0.001)
    app.ingest(src.poll())
    for i in range(1, 1300):
        t[0] = i * 0.25
        if i % 400 == 0:
            src.send(SetBatchSize(8 * (1 + i // 400)))
        app.ingest(src.poll())
    assert len(app.state.series["steps_per_s"]) == 600
    assert len(app.state.series["power_w"]) == 600
    app.refresh_now()
    await pilot.pause()


async def frame_times(app: Any, pilot: Any, frames: int, clock: Callable[[], float]) -> tuple[list[float], ...]:
    """ms of each: rebuilding every chart, waiting for an idle app, a whole frame painted."""
    charts = app.visible_charts
    build, bare, whole = [], [], []
    for _ in range(frames):
        a = clock()
        app.redraw_charts()
        for c in charts:
            c.render()  # what the paint does: build the plotext canvas
        build.append((clock() - a) * 1000)
    for _ in range(frames):
        a = clock()
        await pilot.pause()  # what waiting for an idle app costs with nothing to do
        bare.append((clock() - a) * 1000)
    for _ in range(frames):
        app.state.version += 1
        a = clock()
        app.redraw()
        await pilot.pause()  # let Textual render and composite the frame
        whole.append((clock() - a) * 1000)
    return build, bare, whole


def redraw_costs(
    size: tuple[int, int], frames: int = 20, clock: Callable[[], float] = time.perf_counter
) -> tuple[int, float, float, float]:
    """(charts shown, median ms to rebuild them all, p95 ms, median ms whole frame)."""
    from gpudash.tui.app import GpuDashApp
    from gpudash.tui.demo import SyntheticSource

    t = [0.0]
    src = SyntheticSource(gpu=True, clock=lambda: t[0], startup_s=0.0)
    src.start()

    async def main() -> tuple[int, float, float, float]:
        app = GpuDashApp(src, clock=lambda: 0.0, toasts=False, maxlen=600)
        async with app.run_test(size=size) as pilot:
            await filled(app, src, pilot, t)
            build, bare, whole = await frame_times(app, pilot, frames, clock)
            build.sort()
            extra = max(0.0, statistics.median(whole) - statistics.median(bare))
            return len(app.visible_charts), statistics.median(build), build[int(0.95 * (len(build) - 1))], extra

    return asyncio.run(main())


def startup_rows(tries: int) -> list[Row]:
    """The fresh import of the app and the in-process first frame, best of ``tries`` each."""
    imp = min(fresh_import_s() for _ in range(tries))
    ff = min(in_process_first_frame_s() for _ in range(tries))
    return [
        (f"import gpudash.tui.app (fresh interpreter, best of {tries})", f"{imp * 1000:.0f} ms", "—"),
        ("first frame, in process (construct app -> painted)", f"{ff * 1000:.0f} ms", "≤ 1500 ms"),
    ]


def whole_process_rows(tries: int) -> list[Row]:
    """The first frame in a pty: the demo (best of ``tries``), and the real ``gpudash`` where it is installed."""
    demo = [sys.executable, "-m", "gpudash.tui.demo", "--gpu"]
    ok = [x for x in (pty_first_frame(demo, b"Quit")[0] for _ in range(tries)) if x is not None]
    shown = f"{min(ok) * 1000:.0f} ms" if ok else "not seen"
    rows = [("first frame, whole process: python -m gpudash.tui.demo", shown, "≤ 1500 ms")]
    exe = shutil.which("gpudash") or str(Path(sys.executable).parent / "gpudash")
    if os.path.exists(exe):
        first, note = pty_first_frame([exe], b"Quit", after_frame=child_torch_state)
        shown = f"{first * 1000:.0f} ms" if first else "not seen"
        rows.append((f"first frame, whole process: gpudash ({note})", shown, "≤ 1500 ms"))
    return rows


def redraw_rows(frames: int) -> list[Row]:
    """The redraw of the charts and the whole frame over ``frames`` frames, at 100x30 and at 160x48."""
    rows: list[Row] = []
    for cols, lines in ((100, 30), (160, 48)):
        n, med, p95, whole = redraw_costs((cols, lines), frames)
        rows.append(
            (
                f"redraw {n} charts at full buffers, {cols}x{lines} (median / p95)",
                f"{med:.1f} / {p95:.1f} ms",
                "≤ 25 ms",
            )
        )
        rows.append(
            (f"whole frame: state -> charts -> Textual paint, {cols}x{lines} (median, approx.)", f"{whole:.1f} ms", "—")
        )
    return rows


def measure(run: Run, p: Params) -> None:
    rows = startup_rows(p.tries) + (whole_process_rows(p.tries) if p.whole_process else []) + redraw_rows(p.frames)
    table = run.table(["measure", "result", "target"], ["---", "--:", "---"])
    for row in rows:
        run.row(table, *row)
