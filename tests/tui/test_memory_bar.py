"""Issue 64: the dashboard's memory bar — a job's memory stacked by kind against the GPU's total,
its peak marked — in the stats panel's top border, from the job's memory event."""

from __future__ import annotations

import dataclasses

from rich.text import Text

from gpudash.core.memory_kinds import KINDS
from gpudash.core.memory_note import MemoryNote
from gpudash.core.protocol import MEMORY, Event, EventKind, RunConfig
from gpudash.tui.memory_bar import memory_bar
from gpudash.tui.stats_panel import StatsPanel

from .dashboard import running
from .fakes import FakeSource

GIB = 1 << 30


def memory_event(t: float, **bytes_: int) -> Event:
    """A job's memory event: its bytes by kind (params, …) and by the allocator's counters (the rest)."""
    kinds = {k: n for k, n in bytes_.items() if k in KINDS}
    counters = {k: n for k, n in bytes_.items() if k not in KINDS}
    return Event(t, EventKind.MEASURED, what=MEMORY, message="memory: …", data=MemoryNote(kinds, counters))


def gpu_memory_event(t: float) -> Event:
    """A job's memory on an 80 GiB GPU: 8, 8, 16 and 24 GiB by kind, 60 allocated, 64 at its peak."""
    return memory_event(
        t,
        params=8 * GIB,
        grads=8 * GIB,
        optimizer=16 * GIB,
        activations=24 * GIB,
        allocated=60 * GIB,
        peak=64 * GIB,
        total=80 * GIB,
    )


def test_the_bar_stacks_the_kinds_against_the_gpus_total_and_marks_the_peak() -> None:
    bar = memory_bar(gpu_memory_event(1.0))
    assert bar is not None
    cells = bar.plain.removeprefix("mem ")[:20]
    assert cells == "██▓▓▒▒▒▒░░░░░░·┃    "  # 2+2+4+6 cells of 20, 4 GiB more allocated, the peak at 64/80
    assert bar.plain.endswith(" 64 GiB peak of 80 GiB")


def test_on_the_cpu_the_bar_is_the_processs_resident_set() -> None:
    bar = memory_bar(memory_event(1.0, params=GIB, grads=GIB, optimizer=2 * GIB, activations=GIB, rss=10 * GIB))
    assert bar is not None and bar.plain == "mem ██▓▓▒▒▒▒░░··········" + " 10 GiB resident"
    assert memory_bar(None) is None and memory_bar(memory_event(1.0, rss=GIB)) is None  # no kinds yet


async def test_the_dashboard_shows_a_jobs_memory_bar_once_its_memory_is_measured() -> None:
    async with running(FakeSource(RunConfig()), until=6.0) as (pilot, app, src):
        stats = app.query_one(StatsPanel)
        assert "mem " not in str(stats.border_title or "")
        src.push(gpu_memory_event(6.5))
        app.refresh_now()
        await pilot.pause()
        shown = Text.from_markup(str(stats.border_title)).plain
        assert "mem ██▓▓▒▒▒▒░░░░░░·┃     64 GiB peak of 80 GiB" in shown


def test_a_familys_bar_is_its_samples_kinds_against_nvmls_total() -> None:
    from gpudash.core.protocol import GpuSample, Sample
    from gpudash.tui.memory_bar import sample_note

    s = Sample(
        1.0,
        "resnet50",
        "serial",
        128,
        steps=10,
        samples=1280,
        interval_s=0.5,
        steps_per_s=20.0,
        samples_per_s=2560.0,
        step_ms_p50=50.0,
        step_ms_p95=52.0,
        syncs_per_step=0.0,
        mem_params_mib=8192.0,
        mem_grads_mib=8192.0,
        mem_optimizer_mib=16384.0,
        cuda_allocated_mib=40960.0,
    )
    note = sample_note(s, GpuSample(1.0, mem_total_mib=81920.0))
    bar = memory_bar(note)
    assert bar is not None and bar.plain == "mem ██▓▓▒▒▒▒··" + " " * 10 + " 40 GiB allocated of 80 GiB"
    assert sample_note(dataclasses.replace(s, mem_params_mib=None), None) is None  # a sample without kinds
