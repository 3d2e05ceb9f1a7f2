"""The dashboard over a fake source, driven by Textual's Pilot: what the dashboard tests share."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path

from rich.text import Text
from textual.pilot import Pilot
from textual.widgets import Input, Label, Static

from gpudash.core.protocol import EngineSource, Event, EventKind
from gpudash.tui.app import GpuDashApp
from gpudash.tui.charts import MetricChart
from gpudash.tui.screens import LiveReport
from gpudash.tui.widgets import MessageBar, plain_text

from .conftest import wait_until
from .fakes import FakeSource, run_segment, started

SIZE = (120, 36)
FIXTURE = Path(__file__).parent / "data" / "replay.csv"
DashPilot = Pilot[int]  # GpuDashApp's return value is its exit status


def make_app(
    source: EngineSource | None = None,
    *,
    toasts: bool = False,
    maxlen: int = 600,
    save_dir: str | None = None,
    wall_clock: Callable[[], datetime] = datetime.now,
) -> GpuDashApp:
    """The dashboard over ``source`` (a new FakeSource if None), its run clock stopped at 0."""
    return GpuDashApp(
        source or FakeSource(),
        clock=lambda: 0.0,
        wall_clock=wall_clock,
        toasts=toasts,
        maxlen=maxlen,
        save_dir=save_dir,
    )


async def ready(app: GpuDashApp, pilot: DashPilot) -> None:
    await wait_until(pilot, lambda: app.source_ready, "the source to start")


def message(app: GpuDashApp) -> str:
    """The message bar's text."""
    return app.query_one(MessageBar).text


def chart(app: GpuDashApp, name: str) -> MetricChart:
    return app.query_one(f"#chart-{name}", MetricChart)


def chart_drawing(widget: MetricChart) -> Text:
    """What a chart draws now, with its styles."""
    text = widget.render()
    assert isinstance(text, Text), type(text)
    return text


def chart_text(widget: MetricChart) -> str:
    """What a chart draws now, as plain text."""
    return chart_drawing(widget).plain


def shown(app: GpuDashApp, selector: str, width: int = 120) -> str:
    """What the Static at ``selector`` on the app's main screen shows, as plain text."""
    return plain_text(app.query_one(selector, Static), width)


def prompt_error(app: GpuDashApp) -> str:
    """The open prompt's error line."""
    return str(app.screen.query_one("#prompt-error", Label).content)


def prompt_input(app: GpuDashApp) -> Input:
    """The open prompt's input field."""
    return app.screen.query_one("#prompt-input", Input)


async def running_app(
    pilot: DashPilot, app: GpuDashApp, src: FakeSource, rate: float = 200.0, batch: int = 8, until: float = 10.0
) -> None:
    """A run started at 1 s, at ``rate`` steps/s and batch ``batch`` until ``until``, drawn."""
    await ready(app, pilot)
    src.push(started(1.0, batch=batch), *run_segment(1.0, until, rate, batch=batch))
    app.refresh_now()
    await pilot.pause()


async def cpu_app(pilot: DashPilot, app: GpuDashApp, src: FakeSource) -> None:
    """A run on the CPU (no syncs counted) from 1 s to 5 s at 20 steps/s, drawn."""
    await ready(app, pilot)
    src.push(started(device="cpu"), *run_segment(1.0, 5.0, 20.0, syncs=None))
    app.refresh_now()
    await pilot.pause()


Start = Callable[[DashPilot, GpuDashApp, FakeSource], Awaitable[None]]


@asynccontextmanager
async def running(
    src: FakeSource | None = None,
    start: Start | None = None,
    *,
    rate: float = 200.0,
    batch: int = 8,
    until: float = 10.0,
) -> AsyncIterator[tuple[DashPilot, GpuDashApp, FakeSource]]:
    """A dashboard at SIZE over ``src`` (a new FakeSource if None), once ``start(pilot, app, src)``
    (``running_app`` at ``rate``, ``batch``, ``until`` if None) has run: (the pilot, the app, its source)."""
    src = FakeSource() if src is None else src
    app = make_app(src)
    async with app.run_test(size=SIZE) as pilot:
        if start is None:
            await running_app(pilot, app, src, rate=rate, batch=batch, until=until)
        else:
            await start(pilot, app, src)
        yield pilot, app, src


async def pipelined_after_serial(pilot: DashPilot, app: GpuDashApp, src: FakeSource, rate: float, steps0: int) -> None:
    """200 steps/s (serial, batch 8) from 1 s to 10 s, then pipelined at ``rate`` to 20 s, with a change marker."""
    await running_app(pilot, app, src, rate=200.0)
    src.push(
        Event(10.0, EventKind.CHANGED, "variant", "serial", "pipelined"),
        *run_segment(10.0, 20.0, rate, variant="pipelined", steps0=steps0),
    )
    app.refresh_now()
    await pilot.pause()


def report_shown(app: object, kind: type[LiveReport]) -> str:
    """The text of the live report open over the dashboard (a ``LiveReport`` of ``kind``: the sync
    table, the compile table)."""
    screen = app.screen  # type: ignore[attr-defined]
    assert isinstance(screen, kind)
    return plain_text(screen.query_one(f"#{screen.BODY_ID}", Static))
