"""Snapshots of the main screen at a fixed size with fixed data (pytest-textual-snapshot).

Regenerate after an intended change with ``pytest tests/tui/test_snapshots.py --snapshot-update``
and look at the SVGs in ``__snapshots__/`` before committing them.
"""

from __future__ import annotations

from pathlib import Path

from gpudash.protocol import Event
from gpudash.replay import ReplaySource
from gpudash.tui.app import GpuDashApp

from .conftest import wait_until
from .fakes import NO_GPU, FakeSource, run_segment, started

SIZE = (120, 36)
FIXTURE = Path(__file__).parent / "data" / "replay.csv"


def _app(source) -> GpuDashApp:
    # fixed clock: the run time in the header comes from the data only
    return GpuDashApp(source, clock=lambda: 0.0, toasts=False)


def _settle(app: GpuDashApp):
    async def run_before(pilot) -> None:
        await wait_until(pilot, lambda: app.source_ready, "the source")
        app.refresh_now()
        await pilot.pause()

    return run_before


def test_main_screen_with_a_change_marker(snap_compare):
    src = FakeSource()
    src.push(started(1.0), *run_segment(1.0, 20.0, 200.0),
             Event(20.0, "changed", "variant", "serial", "pipelined"),
             *run_segment(20.0, 40.0, 220.0, variant="pipelined", steps0=4000))
    app = _app(src)
    assert snap_compare(app, terminal_size=SIZE, run_before=_settle(app))


def test_main_screen_without_colour(snap_compare, monkeypatch):
    """NO_COLOR: the lines differ by marker, the legends say which is which, labels sit on the plot."""
    monkeypatch.setenv("NO_COLOR", "1")
    src = FakeSource()
    src.push(started(1.0), *run_segment(1.0, 20.0, 200.0),
             Event(20.0, "changed", "variant", "serial", "pipelined"),
             *run_segment(20.0, 40.0, 220.0, variant="pipelined", steps0=4000))
    app = _app(src)
    assert app.no_color
    assert snap_compare(app, terminal_size=SIZE, run_before=_settle(app))


def test_replayed_csv_without_colour(snap_compare, monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    app = _app(ReplaySource(FIXTURE))
    assert snap_compare(app, terminal_size=SIZE, run_before=_settle(app))


def test_no_nvml(snap_compare):
    src = FakeSource(gpu_info=NO_GPU)
    src.push(started(1.0, batch=4, device="cpu"), *run_segment(1.0, 15.0, 30.0, batch=4, syncs=None),
             Event(15.0, "changed", "batch_size", "4", "8"),
             *run_segment(15.0, 30.0, 18.0, batch=8, syncs=None, steps0=450))
    # no GPU samples on a machine without NVML
    src.queue = [m for m in src.queue if not type(m).__name__ == "GpuSample"]
    app = _app(src)
    assert snap_compare(app, terminal_size=SIZE, run_before=_settle(app))


def test_replayed_csv(snap_compare):
    app = _app(ReplaySource(FIXTURE))
    assert snap_compare(app, terminal_size=SIZE, run_before=_settle(app))
