"""Pilot tests of what the dashboard draws: the GPU panel without NVML, the charts at each terminal
size and over a long run, a toast beside the stats (fake source, no torch)."""

from __future__ import annotations

import pytest
from textual.widgets import Static

from gpudash.tui.stats_panel import StatsPanel
from gpudash.tui.widgets import plain_text

from .conftest import wait_until
from .dashboard import SIZE, chart, chart_text, make_app, ready, running, running_app, shown
from .fakes import NO_GPU, FakeSource, run_segment, started


async def test_no_nvml_says_why_the_gpu_panel_is_empty() -> None:
    src = FakeSource(gpu_info=NO_GPU)
    app = make_app(src)
    async with app.run_test(size=SIZE) as pilot:
        await ready(app, pilot)
        src.push(started(device="cpu"), *run_segment(1.0, 5.0, 20.0, syncs=None))
        app.refresh_now()
        await pilot.pause()
        notice = app.query_one("#gpu-notice", Static)
        assert notice.display
        assert "NVML unavailable: NVML Shared Library Not Found" in plain_text(notice, 120)
        assert not chart(app, "gpu_util").display and not chart(app, "power").display
        assert "NVML unavailable" in shown(app, "#header")
        assert "kernel%" not in plain_text(app.query_one(StatsPanel), 120)


async def test_more_charts_when_the_terminal_is_tall() -> None:
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(app, pilot)
        assert len(app.visible_charts) == 4
    app = make_app()
    async with app.run_test(size=(140, 48)) as pilot:
        await ready(app, pilot)
        assert len(app.visible_charts) == 6


async def test_long_run_stays_bounded() -> None:
    src = FakeSource()
    app = make_app(src, maxlen=300)
    async with app.run_test(size=SIZE) as pilot:
        await ready(app, pilot)
        src.push(started(), *run_segment(1.0, 1001.0, 200.0))  # 4000 samples
        app.refresh_now()
        await pilot.pause()
        assert len(app.state.series["steps_per_s"]) == 300
        tp = chart(app, "throughput")
        assert 0 < tp.points_drawn <= 2 * 2 * tp.size.width
        t0, t1 = app.state.time_range()
        assert t1 == 1001.0 and t0 > 900


async def test_charts_fall_back_to_plotexts_public_build_when_its_internals_are_gone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import gpudash.tui.plotext_adapter as adapter

    async with running() as (pilot, app, src):
        c = chart(app, "throughput")
        fast = chart_text(c)
        # a plotext without the private module the fast path reads (as after an upgrade)
        monkeypatch.setattr(adapter, "_utility", None)  # its internals gone at run time
        monkeypatch.setattr(adapter, "_STYLES", {})
        slow = chart_text(c)
        assert c._fast_render is False
        assert slow.rstrip("\n") == fast.rstrip("\n")
        assert c.spec.title[:8] in slow
        assert any("\u2800" < ch <= "\u28ff" for ch in slow)  # the braille line is drawn


async def test_a_toast_does_not_cover_the_stats() -> None:
    src = FakeSource()
    app = make_app(src, toasts=True)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await running_app(pilot, app, src)
        app.notify("a message long enough to be seen", timeout=30)

        def toasts() -> list:  # Textual's Toast widgets, by type name: the class is not public
            return [w for w in app.screen.walk_children(with_self=False) if type(w).__name__ == "Toast"]

        await wait_until(pilot, lambda: bool(toasts()), "the toast")
        await pilot.pause()
        toast = toasts()[0].region
        stats = app.query_one(StatsPanel).region
        assert toast.area > 0 and not toast.overlaps(stats), (toast, stats)
