"""Charts without colour (markers, legends, NO_COLOR) and with the mouse (readouts, wheel zoom)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from rich.text import Text
from textual.events import MouseScrollDown, MouseScrollUp
from textual.pilot import Pilot

from gpudash.tui.app import GpuDashApp
from gpudash.tui.chart_specs import CHARTS

from .conftest import wait_until
from .dashboard import SIZE, chart, chart_drawing, chart_text, make_app, message, pipelined_after_serial
from .fakes import FakeSource, run_segment


async def two_rates(pilot, app, src) -> None:
    """200 steps/s from 1 s to 10 s, then 300 steps/s (batch 8) to 20 s, with a change marker."""
    await pipelined_after_serial(pilot, app, src, rate=300.0, steps0=1800)


@asynccontextmanager
async def two_rates_app() -> AsyncIterator[tuple[Pilot, GpuDashApp, FakeSource]]:
    """A dashboard at SIZE over ``two_rates``: (the pilot, the app, its source)."""
    src = FakeSource()
    app = make_app(src)
    async with app.run_test(size=SIZE) as pilot:
        await two_rates(pilot, app, src)
        yield pilot, app, src


def test_every_two_line_chart_names_its_lines_by_marker_and_label_not_colour():
    colours = ("blue", "orange", "green", "magenta", "yellow", "red")
    for spec in CHARTS:
        assert not any(c in spec.title for c in colours), spec.title
        if len(spec.lines) == 2:
            a, b = spec.lines
            assert a.marker != b.marker
            assert spec.title.count("⠒") == 1 and spec.title.count("•") == 1
            assert f"⠒ {a.label}" in spec.title and f"• {b.label}" in spec.title
    tp = next(s for s in CHARTS if s.id == "throughput")
    assert tp.title == "⠒ steps/s (left) · • samples/s (right)"


async def test_no_color_charts_draw_each_line_with_its_marker(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("NO_COLOR", "1")
    src = FakeSource()
    app = make_app(src)
    async with app.run_test(size=SIZE) as pilot:
        assert app.no_color
        await two_rates(pilot, app, src)
        drawn = chart_text(chart(app, "throughput"))
        assert "⠒ steps/s (left) · • samples/s (right)" in drawn
        assert "•" * 5 in drawn.replace("⠒ steps/s (left) · • samples/s (right)", "")  # the samples/s line
        assert any("\u2800" < ch <= "\u28ff" and ch != "⠒" for ch in drawn)  # the steps/s line in braille


def cell_style(text: Text, index: int):
    return next(s.style for s in text.spans if s.start <= index < s.end)


async def test_change_labels_sit_on_the_charts_own_background_not_a_white_box(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("NO_COLOR", "1")
    async with two_rates_app() as (pilot, app, src):
        drawn = chart_drawing(chart(app, "throughput"))
        plain = drawn.plain
        label = plain.index("serial→pipelined")
        # a blank cell of the plot on the label's row, past the label and its padding
        blank = plain.index(" ", label + len("serial→pipelined") + 1)
        assert blank < plain.index("\n", label)
        assert cell_style(drawn, label).bgcolor == cell_style(drawn, blank).bgcolor
        assert cell_style(drawn, label).bold


async def test_a_click_on_a_chart_shows_the_values_under_the_cursor():
    async with two_rates_app() as (pilot, app, src):
        tp = chart(app, "throughput")
        width, middle = tp.size.width, tp.size.height // 2
        await pilot.click(tp, offset=(width // 4, middle))  # a quarter in: the first configuration
        early = message(app)
        assert early.startswith("at ") and "⠒ steps/s 200 · • samples/s 1600" in early
        assert tp.tooltip == early
        await pilot.click(tp, offset=(width * 3 // 4, middle))  # three quarters in: the second
        late = message(app)
        assert "⠒ steps/s 300 · • samples/s 2400" in late
        t_early, t_late = (float(m.split(" s:")[0].removeprefix("at ")) for m in (early, late))
        assert 1.0 <= t_early < 10.0 <= t_late <= 20.0


async def wheel(pilot, widget, offset, event, times: int = 1) -> None:
    for _ in range(times):  # Pilot has no wheel of its own: its mouse-event path, with a scroll event
        await pilot._post_mouse_events([event], widget, offset=offset)


async def test_the_wheel_zooms_the_time_axis_around_the_cursor_and_0_resets_it():
    async with two_rates_app() as (pilot, app, src):
        tp, power = chart(app, "throughput"), chart(app, "power")
        whole = tp.window
        assert whole == app.state.time_range()
        at = (tp.size.width // 2, tp.size.height // 2)
        time_under_cursor = tp.time_at(at[0])
        await wheel(pilot, tp, at, MouseScrollUp, times=3)
        a, b = tp.window
        assert (b - a) == pytest.approx((whole[1] - whole[0]) * 0.8**3)
        assert a > whole[0] and b < whole[1]  # around the cursor, not at an edge
        assert tp.time_at(at[0]) == pytest.approx(time_under_cursor, abs=(b - a) / 40)
        assert power.window == tp.window  # one shared time axis
        assert "time axis:" in message(app)
        assert "⠒ steps/s" in chart_text(tp)
        await pilot.press("0")
        assert tp.window == whole and "the whole run" in message(app)
        # out again from a zoom: back to the whole run, never wider
        await wheel(pilot, tp, at, MouseScrollUp)
        await wheel(pilot, tp, at, MouseScrollDown, times=3)
        assert tp.window == whole


async def test_zoomed_in_at_the_right_edge_the_charts_follow_new_samples():
    async with two_rates_app() as (pilot, app, src):
        tp = chart(app, "throughput")
        await wheel(pilot, tp, (tp.size.width - 3, tp.size.height // 2), MouseScrollUp, times=4)
        a, b = tp.window
        assert b == app.state.time_range()[1]
        src.push(*run_segment(20.0, 25.0, 300.0, variant="pipelined", steps0=4800))
        app.refresh_now()
        await wait_until(pilot, lambda: tp.window[1] == app.state.time_range()[1] > b, "the zoomed window to move")
        assert tp.window[1] - tp.window[0] == pytest.approx(b - a)


def test_the_no_color_flag_builds_the_dashboard_with_no_color(monkeypatch: pytest.MonkeyPatch):
    import gpudash.tui.app as app_module
    import gpudash.tui.entry_points as entry_points
    from gpudash.cli import main as cli

    monkeypatch.setenv("NO_COLOR", "")
    monkeypatch.delenv("NO_COLOR")  # restored to what it was after the test
    built: list[bool] = []

    def replay_one_frame(
        path, follow, user_config=None, nodes=()
    ) -> int:  # the dashboard's entry point, app built as it builds it
        built.append(app_module.GpuDashApp(FakeSource()).no_color)
        return 0

    monkeypatch.setattr(entry_points, "run_replay", replay_one_frame)
    assert cli.main(["replay", str(Path(__file__).parent / "data" / "replay.csv"), "--no-color"]) == 0
    assert built == [True]
