"""The sync table (key ``y``): the running configuration's syncs by line, live; one line where
there are none, on the CPU, or before the configuration's first table."""

from __future__ import annotations

from gpudash.boot.gpudash_boot.sync_sites import SiteCounter
from gpudash.boot.gpudash_boot.sync_table import SyncTable
from gpudash.core.protocol import SyncSites
from gpudash.tui.sync_screen import SyncSitesScreen

from .dashboard import cpu_app, report_shown, running
from .fakes import sample

LOSS = "/home/me/project/their_loss.py"


def _sites(per_step: int, t: float = 9.0, batch: int = 8) -> SyncSites:
    counter = SiteCounter()
    for _ in range(10):
        for _ in range(per_step):
            counter.add([(LOSS, 24, "loss_fn"), ("/home/me/project/train.py", 80, "step")])
    return SyncSites(t, "encdec", "serial", batch, "none", counter.table(steps=10))


def _shown(app: object) -> str:
    return report_shown(app, SyncSitesScreen)


async def test_y_shows_the_lines_that_make_the_host_wait_and_follows_the_run() -> None:
    async with running() as (pilot, app, src):
        src.push(_sites(per_step=2))
        app.refresh_now()
        await pilot.press("y")
        await pilot.pause()
        text = _shown(app)
        assert "encdec/serial bs8: 2 waits a step over 10 steps" in text
        assert "their_loss.py:24 (from train.py:80)" in text and "100%" in text
        # the next configuration: no table of its own yet, then one without syncs
        src.push(sample(10.5, 200.0, batch=16))
        app.refresh_now()
        app.screen.redraw()  # type: ignore[attr-defined]
        assert "waiting for this configuration's first steps" in _shown(app)
        src.push(SyncSites(10.6, "encdec", "serial", 16, "none", SyncTable(steps=40, total=0)))
        app.refresh_now()
        app.screen.redraw()  # type: ignore[attr-defined]
        assert "no host-device syncs in the step (40 steps)" in _shown(app)
        await pilot.press("escape")
        assert not isinstance(app.screen, SyncSitesScreen)


async def test_on_the_cpu_the_table_says_syncs_are_counted_on_cuda_only() -> None:
    async with running(start=cpu_app) as (pilot, app, _):
        await pilot.press("y")
        await pilot.pause()
        assert "counted on CUDA devices only (this run: cpu)" in _shown(app)


def test_a_replay_without_a_recorded_table_says_so() -> None:
    from gpudash.tui.sync_screen import sync_table

    assert "no sync table recorded for this configuration" in str(sync_table(None, None, "cuda:0", replay=True))
