"""Snapshots of the main screen at a fixed size with fixed data (pytest-textual-snapshot).

Regenerate after an intended change with ``pytest tests/tui/test_snapshots.py --snapshot-update``
and look at the SVGs in ``__snapshots__/`` before committing them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpudash.core.protocol import Event, EventKind
from gpudash.recording.replay import ReplaySource
from gpudash.tui.app import GpuDashApp

from .conftest import wait_until
from .fakes import NO_GPU, FakeSource, run_segment, started, two_batch_run

SIZE = (120, 36)
FIXTURE = Path(__file__).parent / "data" / "replay.csv"
GPM_FIXTURE = Path(__file__).parent / "data" / "replay-gpm.csv"  # make_fixture --gpm


def _app(source) -> GpuDashApp:
    # fixed clock: the run time in the header comes from the data only
    return GpuDashApp(source, clock=lambda: 0.0, toasts=False)


def _settle(app: GpuDashApp):
    async def run_before(pilot) -> None:
        await wait_until(pilot, lambda: app.source_ready and not (app.replay and app.source.alive), "the source")
        for _ in range(2):  # the second: at the sizes the first's layout gave (GPU rows, GPM's chart)
            app.refresh_now()
            await pilot.pause()

    return run_before


def test_main_screen_with_a_change_marker(snap_compare):
    src = FakeSource()
    src.push(
        started(1.0),
        *run_segment(1.0, 20.0, 200.0),
        Event(20.0, EventKind.CHANGED, "variant", "serial", "pipelined"),
        *run_segment(20.0, 40.0, 220.0, variant="pipelined", steps0=4000),
    )
    app = _app(src)
    assert snap_compare(app, terminal_size=SIZE, run_before=_settle(app))


def test_main_screen_without_colour(snap_compare, monkeypatch):
    """NO_COLOR: the lines differ by marker, the legends say which is which, labels sit on the plot."""
    monkeypatch.setenv("NO_COLOR", "1")
    src = FakeSource()
    src.push(
        started(1.0),
        *run_segment(1.0, 20.0, 200.0),
        Event(20.0, EventKind.CHANGED, "variant", "serial", "pipelined"),
        *run_segment(20.0, 40.0, 220.0, variant="pipelined", steps0=4000),
    )
    app = _app(src)
    assert app.no_color
    assert snap_compare(app, terminal_size=SIZE, run_before=_settle(app))


def test_replayed_csv_without_colour(snap_compare, monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    app = _app(ReplaySource(FIXTURE))
    assert snap_compare(app, terminal_size=SIZE, run_before=_settle(app))


def test_no_nvml(snap_compare):
    src = FakeSource(gpu_info=NO_GPU)
    src.push(
        started(1.0, batch=4, device="cpu"),
        *run_segment(1.0, 15.0, 30.0, batch=4, syncs=None),
        Event(15.0, EventKind.CHANGED, "batch_size", "4", "8"),
        *run_segment(15.0, 30.0, 18.0, batch=8, syncs=None, steps0=450),
    )
    # no GPU samples on a machine without NVML
    src.queue = [m for m in src.queue if not type(m).__name__ == "GpuSample"]
    app = _app(src)
    assert snap_compare(app, terminal_size=SIZE, run_before=_settle(app))


def test_replayed_csv(snap_compare):
    app = _app(ReplaySource(FIXTURE))
    assert snap_compare(app, terminal_size=SIZE, run_before=_settle(app))


@pytest.mark.parametrize("size", [(120, 36), (80, 24)], ids=["120x36", "80x24"])
def test_replayed_csv_with_gpm_and_mfu(snap_compare, size):
    """A Hopper's recording: GPM's gauges in the GPU's row, its chart beside kernel-active %, MFU in
    the header, what was counted in the stats panel's border, the columns that fit."""
    app = _app(ReplaySource(GPM_FIXTURE))
    assert snap_compare(app, terminal_size=size, run_before=_settle(app))


@pytest.mark.parametrize("size", [(80, 24), (40, 12)], ids=["80x24", "40x12"])
@pytest.mark.parametrize("gpu", [True, False], ids=["gpu", "no_nvml"])
def test_small_terminal(snap_compare, size, gpu):
    """The header with its telemetry line, the empty GPU panel's reason (wrapped), the stats'
    first row and the footer, at 80x24 and 40x12 (tests/tui/test_layout.py checks them in words)."""
    app = _app(two_batch_run(gpu))
    assert snap_compare(app, terminal_size=size, run_before=_settle(app))
