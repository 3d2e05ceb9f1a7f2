"""Small terminals and Ctrl+C: what stays on screen at 80x24 and 40x12, and how the dashboard quits."""

from __future__ import annotations

import pytest

from gpudash.tui.app import GpuDashApp
from gpudash.tui.layout import CHART_ROWS, layout_for

from .conftest import wait_until
from .fakes import FakeSource, two_batch_run

SMALL_SIZES = [(80, 24), (40, 12)]
ALL = ("throughput", "step_time", "gpu_util", "power", "memory", "syncs")


def make_app(src: FakeSource) -> GpuDashApp:
    return GpuDashApp(src, clock=lambda: 0.0, toasts=False)


def screen_lines(app: GpuDashApp) -> list[str]:
    """The screen as the terminal shows it, line by line."""
    return [strip.text for strip in app.screen._compositor.render_strips()]


def text_in(lines: list[str], region) -> str:
    """The words inside a region of the screen, borders dropped, lines joined by spaces."""
    rows = [line[region.x : region.right].strip(" │╭╮╰╯─") for line in lines[region.y : region.bottom]]
    return " ".join(r.strip() for r in rows if r.strip())


async def settled(pilot, app: GpuDashApp) -> list[str]:
    await wait_until(pilot, lambda: app.source_ready, "the source")
    app.refresh_now()
    await pilot.pause()
    return screen_lines(app)


@pytest.mark.parametrize("size", SMALL_SIZES)
async def test_without_nvml_a_small_terminal_keeps_the_header_the_reason_the_stats_and_the_footer(size):
    app = make_app(two_batch_run(gpu=False))
    async with app.run_test(size=size) as pilot:
        lines = await settled(pilot, app)
        assert len(lines) == size[1]
        assert "running" in lines[0] and "encdec / serial" in lines[0]  # narrow: the status leads
        assert lines[1].lstrip().startswith("knobs: none · GPU: no telemetry")  # the telemetry line, not line 1 wrapped
        notice = app.query_one("#gpu-notice")
        assert notice.region.bottom <= size[1]
        words = text_in(lines, notice.region)
        assert "NVML unavailable: NVML Shared Library Not Found (libnvidia-ml.so.1)" in words  # wrapped, whole
        now = [i for i, line in enumerate(lines) if line.startswith(" now ")]
        assert now and now[0] < size[1] - 1, "the stats' first row is off screen"
        assert "steps/s" in lines[now[0] - 2]  # under its column names
        assert lines[-1].startswith("? Help q Quit p Pipeline")  # the footer, on the last line, ? and q first


@pytest.mark.parametrize("size", SMALL_SIZES)
async def test_with_a_gpu_a_small_terminal_keeps_the_header_the_stats_and_the_footer(size):
    app = make_app(two_batch_run(gpu=True))
    async with app.run_test(size=size) as pilot:
        lines = await settled(pilot, app)
        assert "running" in lines[0]
        assert lines[1].lstrip().startswith("knobs: none · GPU 0: NVIDIA H100")
        assert any(line.startswith(" now ") for line in lines[:-1])
        assert lines[-1].startswith("? Help q Quit p Pipeline")
        for chart in app.visible_charts:  # a chart is shown whole or not at all
            assert chart.region.bottom <= size[1] and chart.region.height >= CHART_ROWS


def test_charts_give_way_before_the_reason_and_the_stats_do():
    assert layout_for(120, 36, True, ALL).charts == ("throughput", "step_time", "gpu_util", "power")
    assert len(layout_for(140, 48, True, ALL).charts) == 6
    small = layout_for(80, 19, True, ALL)
    assert small.charts == ("throughput", "step_time") and small.stats_rows is None  # one row of charts
    assert layout_for(40, 12, True, ALL).charts == ()  # no room for a readable chart: the stats whole
    roomy = layout_for(80, 24, False, ALL)
    assert roomy.notice and roomy.boxed_notice and len(roomy.charts) == 3
    tiny = layout_for(40, 12, False, ALL)
    assert tiny.notice and not tiny.boxed_notice and tiny.charts == () and tiny.stats_rows == 5


async def test_ctrl_c_quits_like_q_and_stops_the_source():
    src = two_batch_run(gpu=True)
    app = make_app(src)
    async with app.run_test(size=(80, 24)) as pilot:
        await settled(pilot, app)
        await pilot.press("ctrl+c")
        await wait_until(pilot, lambda: src.stopped > 0, "the source to stop")
    assert app.return_code == 0 and src.stopped
