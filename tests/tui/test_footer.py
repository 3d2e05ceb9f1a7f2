"""The footer's keys are recomposed after every notice; the old ones must not stay in memory."""

from __future__ import annotations

import gc

import pytest
from textual.widgets._footer import FooterKey

from gpudash.core.protocol import Event, EventKind
from gpudash.tui.app import GpuDashApp
from gpudash.tui.footer import LeanFooter, prune_closed_watchers

from .conftest import wait_until
from .fakes import FakeSource, run_segment, started

CHANGES = 20  # the leak kept every recompose's keys: 20 recomposes hold ten times the bound below


def footer_keys_alive() -> list[FooterKey]:
    gc.collect()
    return [o for o in gc.get_objects() if isinstance(o, FooterKey)]


@pytest.mark.slow
async def test_an_hour_of_changes_keeps_only_the_footer_keys_on_screen() -> None:
    src = FakeSource()
    app = GpuDashApp(src, clock=lambda: 0.0, toasts=False)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(pilot, lambda: app.source_ready, "the source to start")
        src.push(started(1.0, batch=8), *run_segment(1.0, 10.0, 200.0, batch=8))
        app.refresh_now()
        footer = app.query_one(LeanFooter)
        await wait_until(pilot, lambda: len(footer.query(FooterKey)) > 0, "the footer's keys")
        t, batch = 10.0, 8
        for _ in range(CHANGES):  # a change a minute: each tells a notice, the footer recomposes
            before, batch = batch, 24 - batch
            src.push(
                Event(t, EventKind.CHANGED, "batch_size", str(before), str(batch)),
                *run_segment(t, t + 2.0, 200.0, batch=batch, steps0=int(t * 200)),
            )
            app.refresh_now()
            t += 2.0
            await pilot.pause()
        await pilot.pause()
        shown = len(footer.query(FooterKey))
        alive = footer_keys_alive()
        assert shown > 0
        assert len(alive) <= 2 * shown, f"{len(alive)} footer keys in memory for {shown} on screen"
        assert prune_closed_watchers(footer) <= shown  # at most the keys of the last recompose
