"""The dashboard over the real engine on the CPU: a spawned child that imports torch."""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from textual.widgets import Label, Static

from gpudash.core.protocol import Diagnose, EventKind, Resume, RunConfig, SetBatchSize, SetKnobs, TraceWindow
from gpudash.host.session import EngineSession
from gpudash.tui.app import GpuDashApp, prepare_for_child_processes
from gpudash.tui.screens import KnobsScreen, PromptScreen, TuneResultScreen
from gpudash.tui.widgets import MessageBar, plain_text
from tests.messages import present
from workloads.knobs import Knobs

from .conftest import wait_until
from .dashboard import DashPilot, chart

# about 8 s on 2 cores (torch import in the child)


@asynccontextmanager
async def real_dashboard(
    tmp_path: Path, config: RunConfig, size: tuple[int, int] = (120, 36), save_dir: str | None = None
) -> AsyncIterator[tuple[GpuDashApp, DashPilot, EngineSession]]:
    """The dashboard over a real workload process running ``config``, once its first sample is in;
    quits with q at the end and checks that the workload process is gone."""
    prepare_for_child_processes()  # as run_dashboard does, before Textual swaps sys.stderr
    source = EngineSession(config, log_path=str(tmp_path / "child.log"))
    app = GpuDashApp(source, toasts=False, save_dir=save_dir)
    async with app.run_test(size=size) as pilot:
        await wait_until(pilot, lambda: app.state.last_sample is not None, "a first sample", timeout_s=60)
        yield app, pilot, source
        await pilot.press("q")
        await wait_until(pilot, lambda: not app.is_running, "the app to exit", timeout_s=30)
    assert not source.alive


def changed(app: GpuDashApp, what: str) -> bool:
    """Whether the dashboard has seen a "changed" event about ``what``."""
    return any(e.kind == EventKind.CHANGED and e.what == what for e in app.state.events)


def marked(app: GpuDashApp, label: str) -> bool:
    """Whether the throughput chart draws a change marker labelled ``label``."""
    return any(lbl == label for _, lbl in chart(app, "throughput").marker_labels)


@pytest.mark.slow
async def test_dashboard_over_the_real_engine_on_the_cpu(tmp_path: Path) -> None:
    prepare_for_child_processes()  # as run_dashboard does, before Textual swaps sys.stderr
    source = EngineSession(
        RunConfig(workload="encdec", device="cpu", sample_interval_s=0.25), log_path=str(tmp_path / "child.log")
    )
    app = GpuDashApp(source, toasts=False)
    t0 = time.perf_counter()
    async with app.run_test(size=(120, 36)) as pilot:
        # the first frame does not wait for torch: the app is up and says so at once
        assert app.state.status == "starting"
        await wait_until(pilot, lambda: app.state.last_sample is not None, "a first sample", timeout_s=60)
        first_sample_s = time.perf_counter() - t0
        assert app.state.run.workload == "encdec" and app.state.device == "cpu"
        batch = present(app.state.run.batch_size)
        assert batch >= 1
        await pilot.press("plus")
        assert list(app.controller.sent) == [SetBatchSize(batch * 2)]
        await wait_until(pilot, lambda: changed(app, "batch_size"), "the change event", timeout_s=60)
        app.refresh_now()
        assert marked(app, f"batch {batch}→{batch * 2}")
        await wait_until(
            pilot,
            lambda: app.state.run.batch_size == batch * 2 and present(app.state.last_sample).batch_size == batch * 2,
            "a sample at the new batch",
            timeout_s=60,
        )
        pid = source.runner.pid
        await pilot.press("q")
        await wait_until(pilot, lambda: not app.is_running, "the app to exit", timeout_s=30)
    assert not source.alive
    assert not any(p.pid == pid for p in multiprocessing.active_children())
    print(f"first sample after {first_sample_s:.1f} s")


@pytest.mark.slow
async def test_the_knobs_panel_changes_the_real_workloads_knobs_on_the_cpu(tmp_path: Path) -> None:
    config = RunConfig(workload="encdec", device="cpu", sample_interval_s=0.25)
    async with real_dashboard(tmp_path, config) as (app, pilot, _):
        await pilot.press("k")
        assert isinstance(app.screen, KnobsScreen)
        assert app.screen.query_one("#knob-cuda_graph").disabled  # needs CUDA: this run is on the CPU
        await pilot.click("#knob-channels_last")
        await pilot.click("#knobs-apply")
        assert list(app.controller.sent) == [SetKnobs("channels_last=on")]
        await wait_until(pilot, lambda: changed(app, "knobs"), "the knobs' change event", timeout_s=60)
        await wait_until(
            pilot,
            lambda: present(app.state.last_sample).knobs == "channels_last=on",
            "a sample with the knob on",
            timeout_s=60,
        )
        app.refresh_now()
        assert app.state.markers[-1].label == "+channels_last" and marked(app, "+channels_last")
        assert "knobs: channels_last" in plain_text(app.query_one("#header", Static), 120)


@pytest.mark.slow
async def test_the_profile_key_traces_the_real_workload_on_the_cpu(tmp_path: Path) -> None:
    traces = tmp_path / "traces"
    config = RunConfig(
        workload="sync_loss",
        variant="fixed",
        device="cpu",
        image_size=32,
        sample_interval_s=0.25,
        trace_dir=str(traces),
    )
    async with real_dashboard(tmp_path, config) as (app, pilot, _):
        await pilot.press("T")
        assert list(app.controller.sent) == [TraceWindow(20)]
        await wait_until(pilot, lambda: app.state.last_trace is not None, "the window's measured event", timeout_s=60)
        app.refresh_now()
        files = list(traces.glob("*.json.gz"))
        assert len(files) == 1 and present(app.state.last_trace).details["trace_path"] == str(files[0])
        said = app.query_one(MessageBar).text
        assert "ui.perfetto.dev" in said and str(files[0]) in said and "GPU figures need CUDA" in said
        assert "GPU figures need CUDA" in str(app.query_one("#stats").border_title)
        assert marked(app, "trace")


@pytest.mark.slow
async def test_the_diagnose_key_shows_the_verdict_until_the_configuration_changes(tmp_path: Path) -> None:
    config = RunConfig(workload="encdec", variant="serial", device="cpu", sample_interval_s=0.25)
    async with real_dashboard(tmp_path, config, size=(160, 40)) as (app, pilot, _):
        await pilot.press("d")
        assert list(app.controller.sent) == [Diagnose()]
        await wait_until(pilot, lambda: app.state.last_diagnosis is not None, "the diagnosis", timeout_s=60)
        app.refresh_now()
        assert "diagnosis: CPU-bound: " in str(app.query_one("#stats").border_title)
        await pilot.press("plus")  # another batch size: another configuration, its own diagnosis to take
        await wait_until(pilot, lambda: app.state.last_diagnosis is None, "the line to go", timeout_s=60)
        app.refresh_now()
        assert "diagnosis" not in str(app.query_one("#stats").border_title or "")


@pytest.mark.slow
async def test_u_tunes_the_running_workload_and_enter_runs_the_winner_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The dashboard's tune on the CPU: u, a budget, the run pauses while `gpudash tune` races it
    in a child; its answer is shown, enter applies the winner to this run, which resumes."""
    monkeypatch.chdir(tmp_path)
    config = RunConfig(workload="sync_loss", device="cpu", batch_size=8, sample_interval_s=0.25)
    async with real_dashboard(tmp_path, config, save_dir=str(tmp_path)) as (app, pilot, _):
        await pilot.press("u")
        assert isinstance(app.screen, PromptScreen)
        await pilot.press("backspace", "0", ".", "5", "enter")  # "5" → "0.5" minutes
        await wait_until(pilot, lambda: app.state.paused, "the run to pause", timeout_s=30)
        job = present(app.tune_job)
        assert job.request.max_minutes == 0.5
        await wait_until(
            pilot,
            lambda: isinstance(app.screen, TuneResultScreen) and len(app.screen.query("Label")) > 0,
            "tune's answer on screen",  # the screen is current before its labels are mounted
            timeout_s=240,
        )
        result = job.result()
        assert not isinstance(result, str), result
        assert (job.out_dir / "tune.md").is_file() and job.out_dir.parent == tmp_path
        shown = " ".join(str(label.content) for label in app.screen.query("Label").results(Label))
        assert f"fastest: {result.winner} at batch 8" in shown and result.command in shown
        await pilot.press("enter")
        assert list(app.controller.sent)[-1] == Resume()
        await wait_until(
            pilot,
            lambda: not app.state.paused and app.state.run.variant == result.variant,
            "the winner running here",
            timeout_s=60,
        )
        assert app.controller.knobs == Knobs(result.knobs)
