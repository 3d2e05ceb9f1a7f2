"""``gpudash watch``'s dashboard (Pilot): every GPU's row and its processes, the GPM chart or why
there is none, recording from it, the machine without NVML, its keys, and a process snapshot that
comes back as it closes. NVML is faked at the ``pynvml`` boundary, as in tests/test_watch.py
(``--once``, ``--record`` headless), whose fixtures and box of fake GPUs these tests share."""

from __future__ import annotations

import asyncio
import html
import json
from pathlib import Path

import pytest
from textual.widgets import Static

from gpudash.core.protocol import Event, GpuSample
from gpudash.recording.replay import ReplaySource, read_all
from gpudash.tui.charts import MetricChart
from gpudash.tui.gpu_rows import GpuRows
from gpudash.tui.widgets import MessageBar, plain_text
from gpudash.watch.app import ProcessTable, WatchApp
from gpudash.watch.source import WatchSource
from tests.fake_gpm import add_gpm
from tests.test_watch import ME, MY_USER, NOT_A_PID, busy_box
from tests.test_watch import box as box  # a fixture: pytest finds it here by its name
from tests.test_watch import no_nvml as no_nvml  # a fixture too

from .tui.conftest import wait_until


# -- the dashboard (Pilot) --------------------------------------------------------------------------------
def rows(app: WatchApp) -> list[str]:
    widget = app.query_one(GpuRows)
    return plain_text(widget, widget.size.width).rstrip("\n").split("\n") if widget.display else []


def table_text(app: WatchApp) -> str:
    widget = app.query_one(ProcessTable)
    return plain_text(widget, widget.size.width) if widget.display else ""


def plain_text_of_footer(app: WatchApp) -> str:
    """The keys the footer shows (their descriptions)."""
    return " ".join(str(key.render()) for key in app.query("FooterKey"))


def message(app: WatchApp) -> str:
    return app.query_one(MessageBar).text


@pytest.mark.slow
async def test_the_watch_dashboard_shows_every_gpu_and_its_processes(box, tmp_path: Path) -> None:
    busy_box(box)
    source = WatchSource(0.05)
    app = WatchApp(source, toasts=False, save_dir=str(tmp_path))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: len(rows(app)) == 3, "a row per GPU")
        assert message(app).startswith("watching every GPU, no workload")
        await wait_until(pilot, lambda: str(NOT_A_PID) in table_text(app), "the process table")
        shown = rows(app)
        assert shown[0].startswith("▶ GPU 0") and "10%" in shown[0] and "41°C" in shown[1]
        await wait_until(pilot, lambda: "62%" in rows(app)[2], "GPM's figures in the rows")  # GPU 2's SM%
        table = table_text(app)
        mine = next(line for line in table.splitlines() if f" {ME} " in line)
        assert MY_USER in mine and "1.50 GiB" in mine
        elsewhere = next(line for line in table.splitlines() if f" {NOT_A_PID} " in line)
        assert elsewhere.split() == ["0", str(NOT_A_PID), "?", "0.50", "GiB", "?"]
        assert (
            "Xorg" in table and "GPU 2: processes n/a" in table and "GPU 1 throttle: sw_power_cap, sw_thermal" in table
        )
        # heading, column names, 3 processes and the notes: a long command is cut, not wrapped
        # (its size follows the text at the next layout: waited for, not read at once)
        await wait_until(pilot, lambda: app.query_one(ProcessTable).size.height == 6, "the table's six lines")
        # the footer recomposes its keys when the bindings change: wait for them, never read a frame between
        await wait_until(pilot, lambda: "Record" in plain_text_of_footer(app), "the footer's keys")
        footer = plain_text_of_footer(app)
        assert "Record" in footer and "Next GPU" in footer and "Pipeline" not in footer
        visible = {c.spec.id for c in app.visible_charts}
        assert visible == {"gpu_util", "gpm", "power", "memory", "temperature"}  # GPM's beside kernel-active
        await wait_until(pilot, lambda: app.query_one("#chart-gpu_util", MetricChart).points_drawn > 0, "a chart")
        # a workload's key says why it does nothing; the run goes on
        await pilot.press("p")
        assert message(app).startswith("gpudash watch runs no workload: Toggle pipelining needs one")
        await pilot.press("plus")
        assert "runs no workload" in message(app)
        # g: the charts move to GPU 1, marked on them
        await pilot.press("g")
        await wait_until(pilot, lambda: (info := app.state.gpu_info) is not None and info.index == 1, "GPU 1 charted")
        assert "the charts show GPU 1" in message(app)
        await wait_until(pilot, lambda: rows(app)[1].startswith("▶ GPU 1"), "the mark on GPU 1")
        assert any(m.label == "gpu 0→1" for m in app.state.markers)
        # s: a screenshot
        saved = app.save_svg("watch.svg")
        assert saved is not None and "Fake GPU 1" in html.unescape(Path(saved).read_text()).replace("\xa0", " ")
        await pilot.press("q")
    assert source.alive is False


@pytest.mark.slow
async def test_without_gpm_the_watch_dashboard_says_why_and_draws_no_gpm_chart(box) -> None:
    add_gpm(box(2)).unsupported |= {0, 1}  # GPUs before Hopper
    app = WatchApp(WatchSource(0.05), toasts=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: "needs a Hopper or newer GPU: Fake GPU 0 has none" in message(app), "why")
        await asyncio.sleep(0.3)  # ticks go by: no empty GPM chart takes the room
        assert {c.spec.id for c in app.visible_charts} == {"gpu_util", "power", "memory", "temperature"}
        assert len(rows(app)) == 2 and "11%" in rows(app)[1]
        await pilot.press("q")


@pytest.mark.slow
async def test_recording_from_the_watch_dashboard_is_a_recording(box, tmp_path: Path) -> None:
    box(2)
    source = WatchSource(0.05)
    app = WatchApp(source, toasts=False)
    path = tmp_path / "rec.csv"
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: len(rows(app)) == 2, "a row per GPU")
        app.start_recording(str(path))
        assert "REC" in plain_text(app.query_one("#header", Static), 120)
        await wait_until(pilot, lambda: app.controller.recording.written >= 5, "rows recorded")
        await pilot.press("c")  # stops it
        assert app.controller.recording.recorder is None
    messages = read_all(ReplaySource(path))
    assert sum(isinstance(m, GpuSample) for m in messages) >= 5
    assert not [m for m in messages if isinstance(m, Event)]
    assert json.loads(path.with_suffix(".json").read_text())["recorded_by"] == "gpudash watch"


@pytest.mark.slow
async def test_without_nvml_the_watch_dashboard_says_why_and_stays_up(no_nvml) -> None:
    app = WatchApp(WatchSource(0.05), toasts=False)
    async with app.run_test(size=(100, 30)) as pilot:
        notice = app.query_one("#gpu-notice", Static)
        await wait_until(pilot, lambda: notice.display, "the notice")
        text = plain_text(notice, 100)
        assert "No GPU to watch — NVML unavailable: NVML library (libnvidia-ml) not found" in text
        assert app.visible_charts == [] and not app.query_one(ProcessTable).display
        await pilot.press("g")
        assert message(app) == "no GPU to chart: NVML is unavailable"
        await pilot.press("c")
        assert message(app).startswith("nothing to record: NVML is unavailable here")
        await asyncio.sleep(0.2)
        assert app.is_running and app.status_text() == "no NVML"
        await pilot.press("q")


@pytest.mark.slow
def test_watch_help_lists_its_keys_not_a_workloads(box) -> None:
    box(1)
    app = WatchApp(WatchSource(0.05), toasts=False)
    keys = {key: what for _, key, what in app.key_help()}
    assert {"g", "c", "s", "?", "q", "0"} <= set(keys)
    assert not {"p", "v", "w", "+", "-", "b", "k", "t", "T", "d", "e", "space", "r"} & set(keys)


@pytest.mark.slow
async def test_a_process_snapshot_that_comes_back_while_the_dashboard_closes_is_dropped(box) -> None:
    box(2)
    source = WatchSource(0.05)
    app = WatchApp(source, toasts=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_until(pilot, lambda: len(rows(app)) == 2, "a row per GPU")
        snap = source.snapshot()
        await app.query_one(ProcessTable).remove()  # as on quitting: the widgets go first
        app._show_processes(snap)  # the worker's call_from_thread lands after them
        assert app.snapshot is not snap and app.is_running
