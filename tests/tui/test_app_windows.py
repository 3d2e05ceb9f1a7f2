"""Pilot tests of the measurements the dashboard asks for: a profiler window (T) and a data-parallel
run's scaling efficiency (e) (fake source, no torch)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from gpudash.core.protocol import Event, EventKind, RunConfig
from gpudash.core.trace_note import TraceNote
from gpudash.recording.replay import ReplaySource
from gpudash.tui.stats_panel import StatsPanel
from tests.messages import present

from .conftest import palette_titles, replay_loaded, run_palette, wait_until
from .dashboard import FIXTURE, SIZE, chart, make_app, message, running, running_app
from .fakes import FakeSource, run_segment


async def test_the_profile_key_asks_for_a_window_and_shows_its_figures_and_marker() -> None:
    from gpudash.core.protocol import TraceWindow
    from tests.test_controller import TRACE_PATH, trace_event

    async with running(FakeSource(RunConfig(trace_dir="/runs/gpudash-traces")), until=12.0) as (pilot, app, src):
        await pilot.press("T")
        assert src.sent == [TraceWindow(20)]
        assert message(app).startswith("profiling 20 steps…")
        src.push(trace_event(13.0), *run_segment(13.0, 20.0, 200.0, steps0=2600))
        app.refresh_now()
        await pilot.pause()
        assert "open in ui.perfetto.dev" in message(app) and TRACE_PATH in message(app)
        assert "last trace: GPU busy 72%, idle 28%, overlap 31%, 145 kernels/step (t=12.3 s)" in str(
            app.query_one(StatsPanel).border_title
        )
        assert (12.34, "trace") in chart(app, "throughput").marker_labels


async def test_the_last_trace_line_is_readable_at_80x24() -> None:

    from tests.test_controller import trace_event

    src = FakeSource(RunConfig(trace_dir="/runs/gpudash-traces"))
    app = make_app(src)
    async with app.run_test(size=(80, 24)) as pilot:
        await running_app(pilot, app, src, until=12.0)
        src.push(trace_event(13.0))
        app.refresh_now()
        await pilot.pause()
        stats = app.query_one(StatsPanel)
        assert stats.region.bottom <= 23  # the line costs no row: the panel stays above the footer
        line = "last trace: GPU busy 72%, idle 28%, overlap 31%, 145 kernels/step (t=12.3 s)"
        assert line in str(stats.border_title)
        shown = app.export_screenshot().replace("\u00a0", " ").replace("&#160;", " ")
        assert "145 kernels/step (t=12.3 s)" in shown  # drawn whole in the panel's top border


async def test_the_profile_key_says_why_not_without_a_trace_dir_and_in_a_replay() -> None:
    src = FakeSource()  # RunConfig().trace_dir is None
    app = make_app(src)
    async with app.run_test(size=SIZE) as pilot:
        await running_app(pilot, app, src)
        await pilot.press("T")
        assert src.sent == [] and "no trace directory" in message(app)
    app = make_app(ReplaySource(FIXTURE))
    async with app.run_test(size=SIZE) as pilot:
        await replay_loaded(pilot, app)
        await pilot.press("T")
        assert "replay: read-only" in message(app) and "profiler window" in message(app)
        await pilot.press("p")  # every steering key says why, not only T
        assert "replay: read-only — Toggle pipelining needs a live run" in message(app)
        assert not any("Profile" in t for t in palette_titles(app))
        assert not any(
            b.binding.action == "trace_window"
            for b in app.active_bindings.values()
            if app.check_action(b.binding.action, ())
        )


async def test_the_palette_asks_for_a_profiler_window() -> None:
    from gpudash.core.protocol import TraceWindow

    async with running(FakeSource(RunConfig(trace_dir="/runs/gpudash-traces"))) as (pilot, app, src):
        assert "Profile 20 steps (torch.profiler window) (T)" in palette_titles(app)
        await run_palette(pilot, app, "profile 20", "Profile 20 steps")
        await wait_until(pilot, lambda: src.sent == [TraceWindow(20)], "the control")
        assert message(app).startswith("profiling 20 steps…")


def with_figures(trace: Event, **figures: float) -> TraceNote:
    """A profiler window's answer with more figures."""
    assert isinstance(trace.data, TraceNote)
    return dataclasses.replace(trace.data, figures={**trace.data.figures, **figures})


def test_a_live_dashboard_run_gets_a_trace_directory(tmp_path: Path) -> None:
    from gpudash.tui.entry_points import with_trace_dir

    assert with_trace_dir(RunConfig(), cwd=str(tmp_path)).trace_dir == str(tmp_path / "gpudash-traces")
    assert with_trace_dir(RunConfig(trace_dir="/x")).trace_dir == "/x"
    assert not (tmp_path / "gpudash-traces").exists()  # made by the engine when a window is taken


async def test_a_data_parallel_run_shows_its_ranks_and_asks_for_its_scaling_efficiency() -> None:

    from gpudash.core.protocol import MeasureScaling, RunConfig

    async with running(FakeSource(RunConfig(nproc=2)), until=4.0) as (pilot, app, src):
        last = present(app.state.last_sample)
        src.push(
            dataclasses.replace(
                last, time_s=last.time_s + 0.25, world_size=2, slowest_rank=1, slowest_rank_step_ms=4.31
            )
        )
        await pilot.press("e")
        assert src.sent[-1] == MeasureScaling()
        src.push(
            Event(
                time_s=5.0,
                kind=EventKind.MEASURED,
                what="scaling",
                message="2 ranks at 190 steps/s, one rank alone 200 steps/s: scaling efficiency 0.95",
                details={"scaling_efficiency": "0.95", "world_size": "2"},
            )
        )
        app.refresh_now()
        await pilot.pause()
        line = "2 ranks (DDP) · slowest rank 1: 4.31 ms/step p50 · scaling efficiency 0.95 (t=5 s)"
        assert line in str(app.query_one(StatsPanel).border_title)
        shown = app.export_screenshot().replace("\u00a0", " ").replace("&#160;", " ")
        assert "slowest rank 1: 4.31 ms/step p50" in shown  # drawn in the panel's top border


async def test_the_scaling_key_says_why_not_without_ranks() -> None:
    async with running(until=4.0) as (pilot, app, src):
        await pilot.press("e")
        assert "needs a data-parallel run" in message(app) and not src.sent
        assert app.query_one(StatsPanel).border_title is None


async def test_a_data_parallel_runs_line_shows_the_all_reduce_exposed_in_the_last_profiler_window() -> None:
    """Issue 55: with several ranks, the stats panel's ranks line says how long each step's gradient
    all-reduce ran with nothing beside it, from the last profiler window (``T``)."""
    from tests.test_controller import trace_event

    async with running(FakeSource(RunConfig(nproc=2)), until=4.0) as (pilot, app, src):
        last = present(app.state.last_sample)
        src.push(dataclasses.replace(last, time_s=last.time_s + 0.25, world_size=2))
        trace = trace_event(t=6.0)
        src.push(
            dataclasses.replace(trace, data=with_figures(trace, comm_ms_per_step=2.1, comm_exposed_ms_per_step=0.34))
        )
        app.refresh_now()
        await pilot.pause()
        title = str(app.query_one(StatsPanel).border_title)
        assert "2 ranks (DDP) · all-reduce exposed 0.34 ms/step (t=6 s)" in title
        assert "all-reduce 2.1 ms/step, 0.34 exposed" in str(app.controller.last_trace_text())


async def test_each_ranks_step_time_and_exposed_all_reduce_are_in_the_ranks_line() -> None:
    """Issue 55: with several ranks, each one's step time p50 (and its exposed all-reduce, where its
    latest profiler window gave one) side by side in the stats panel's border."""
    from gpudash.core.protocol import RankSample

    async with running(FakeSource(RunConfig(nproc=2)), until=4.0) as (pilot, app, src):
        last = present(app.state.last_sample)
        t = last.time_s + 0.25
        src.push(dataclasses.replace(last, time_s=t, world_size=2, slowest_rank=1, slowest_rank_step_ms=12.4))
        src.push(RankSample(t, 0, 100, 80.0, 12.1, node=0, allreduce_exposed_ms=0.31))
        src.push(RankSample(t, 1, 100, 80.0, 12.4, node=0, allreduce_exposed_ms=0.52))
        app.refresh_now()
        await pilot.pause()
        title = str(app.query_one(StatsPanel).border_title)
        assert "ms/step p50 (all-reduce exposed): r0 12.1 (0.31), r1 12.4 (0.52)" in title
        assert "slowest rank 1: 12.4 ms/step p50" in title
