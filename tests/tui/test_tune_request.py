"""What the dashboard's u asks tune to race: the configuration on screen, as it runs now — after
a switch of workload too, where the run's --image-size no longer applies (the builder's rule)."""

from __future__ import annotations

from pathlib import Path

from gpudash.core.protocol import Event, EventKind, RunConfig
from gpudash.core.running import Running

from .dashboard import running
from .fakes import FakeSource


async def test_u_asks_for_the_running_variant_knobs_and_images_also_after_a_workload_switch(tmp_path: Path) -> None:
    config = RunConfig(workload="encdec", image_size=32, workers=2, seed=7)
    async with running(FakeSource(config)) as (_, app, _src):
        tune = app.controller.tune
        before = tune.request(1.0)
        assert (before.workload, before.batch_size, before.image_size, before.workers, before.seed) == (
            "encdec",
            8,
            32,
            2,
            7,
        )
        assert before.current == "serial"  # the started event named no knob: none runs
        switched = Running("sync_loss", "fixed", 16, "channels_last=on")
        app.ingest([Event(11.0, EventKind.CHANGED, "workload", "encdec", "sync_loss", running=switched)])
        after = tune.request(1.0)
        assert (after.workload, after.batch_size, after.current) == ("sync_loss", 16, "fixed+channels_last")
        assert after.image_size is None and after.workers == 2  # the family's own images; the run's workers
        argv = after.argv(tmp_path)
        assert argv[argv.index("--current") + 1] == "fixed+channels_last" and "--image-size" not in argv
