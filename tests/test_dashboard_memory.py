"""The dashboard's memory stays bounded over a long run with many changes (issue 23, 15c).

What grew in a real terminal: Textual's escape-code cache kept one Rich style per (colours, screen
position) ever drawn, ~950 bytes each, thousands on a large terminal (``gpudash.tui.render_cache``);
and the controller kept every control ever sent. The frames here are rendered to escape codes as in
a terminal (a headless app never renders them, which is why the pilot soak did not see it).
"""

from __future__ import annotations

import re
import tracemalloc
from typing import ClassVar

import pytest
from rich.color import ColorSystem
from rich.style import Style
from textual.drivers.headless_driver import HeadlessDriver
from textual.strip import Strip

from gpudash.core.protocol import Event, EventKind, Message, RunConfig, SetBatchSize
from gpudash.core.running import Running
from gpudash.tui.app import GpuDashApp
from gpudash.tui.charts import MetricChart
from gpudash.tui.controller import MAX_SENT, DashController
from gpudash.tui.render_cache import bound_render_ansi, cached_escape_codes

from .tui.fakes import FakeSource, run_segment, started

COLOURS = ("red", "#5050ff", "green", "#ffaa00")
ESCAPES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x1b]*\x1b\\")


def test_escape_codes_are_kept_per_colour_not_per_screen_position() -> None:
    """5,000 segments at distinct positions in 4 colours: 4 codes kept, the same codes as Textual's."""
    bound_render_ansi()
    styles = [
        Style(color=c, bold=True) + Style.from_meta({"offset": (i % 200, i // 200)})
        for i, c in enumerate(COLOURS * 1250)
    ]
    expected = {c: Style(color=c, bold=True).render("x", color_system=ColorSystem.TRUECOLOR) for c in COLOURS}
    before = cached_escape_codes()
    tracemalloc.start()
    start = tracemalloc.get_traced_memory()[0]
    for style, colour in zip(styles, COLOURS * 1250, strict=False):
        assert Strip.render_style(style, "x", ColorSystem.TRUECOLOR) == expected[colour]
    del styles
    held = tracemalloc.get_traced_memory()[0] - start
    tracemalloc.stop()
    assert cached_escape_codes() - before <= len(COLOURS)
    assert held < 100 * 1024  # Textual's own cache held ~4.6 MB for these


class FrameDriver(HeadlessDriver):
    """A driver that is not headless: the app renders its frames to escape codes, kept in ``written``."""

    written: ClassVar[list[str]] = []

    @property
    def is_headless(self) -> bool:
        return False

    def write(self, data: str) -> None:
        FrameDriver.written.append(data)


def changes(n: int, every_s: float = 30.0) -> list[Message]:
    """A run with a change of batch size every ``every_s`` s, ``n`` times: 4 → 8 → 4 → …"""
    out: list[Message] = [started(1.0, batch=4)]
    t, batch = 1.0, 4
    for _ in range(n):
        out += run_segment(t, t + every_s, 200.0 / batch, batch=batch, steps0=int(t * 50))
        t += every_s
        new = 12 - batch
        out.append(
            Event(t, EventKind.CHANGED, "batch_size", str(batch), str(new), running=Running("encdec", "serial", new))
        )
        batch = new
    return out + run_segment(t, t + 20.0, 200.0 / batch, batch=batch, steps0=int(t * 50))


@pytest.mark.slow
async def test_a_long_run_on_a_large_terminal_keeps_few_escape_codes_and_draws_the_newest() -> None:
    """40 changes, 20 minutes of samples, drawn at 200×60 a frame every two minutes: the codes kept
    stay few (Textual's cache kept thousands of styles here, each frame's cells at positions of
    their own), and the charts show the newest data and the latest changes' markers."""
    src = FakeSource()
    app = GpuDashApp(src, clock=lambda: 0.0, toasts=False)
    app.driver_class = FrameDriver  # run_test(headless=False) runs it
    FrameDriver.written = []
    messages = changes(40)
    async with app.run_test(size=(200, 60), headless=False) as pilot:
        while not app.source_ready:
            await pilot.pause(0.01)
        for i in range(0, len(messages), 480):  # two minutes of samples between frames
            src.push(*messages[i : i + 480])
            app.refresh_now()
            await pilot.pause()
        assert cached_escape_codes() < 200
        chart = app.query_one("#chart-throughput", MetricChart)
        assert chart.points_drawn > 0 and chart.window[0] > 1000  # the newest samples, not the run's start
        assert (1201.0, "batch 8→4") in chart.marker_labels  # the latest change, marked
        FrameDriver.written.clear()
        app.refresh_now()
        await pilot.pause()
        terminal = ESCAPES.sub("", "".join(FrameDriver.written))
        assert "batch 8→4" in terminal and "steps/s" in terminal  # written to the terminal
        await pilot.press("q")


def test_the_controller_keeps_the_latest_controls_not_every_one() -> None:
    src = FakeSource(RunConfig(workload="encdec"))
    ctl = DashController(src)
    src.start()
    src.push(started(1.0, batch=8), *run_segment(1.0, 3.0, 100.0))
    ctl.source_started()
    for i in range(MAX_SENT * 3):
        ctl.requests.set_batch(i + 1)
    assert len(ctl.sent) == MAX_SENT
    assert ctl.sent[-1] == SetBatchSize(MAX_SENT * 3)  # the newest kept
    assert len(src.sent) == MAX_SENT * 3  # every one was sent
