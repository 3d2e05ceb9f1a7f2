"""The dashboard over the real engine on the CPU: a spawned child that imports torch."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import multiprocessing
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from textual.widgets import Label, Static

from gpudash.core.protocol import Control, Diagnose, EventKind, Resume, RunConfig, SetBatchSize, SetKnobs, TraceWindow
from gpudash.core.trace_note import TraceNote
from gpudash.host.session import EngineSession
from gpudash.tui.app import GpuDashApp
from gpudash.tui.entry_points import prepare_for_child_processes
from gpudash.tui.screens import KnobsScreen, PromptScreen, TuneResultScreen
from gpudash.tui.widgets import MessageBar, plain_text
from tests.helpers import once_per_session
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


WAIT_S = 180.0  # the most one step of the drive takes on a loaded machine


@dataclass
class Seen:
    """What one dashboard over one real encdec workload (serial, on the CPU, with a trace
    directory) showed as it was driven: d, +, k, T, q in turn (``driven_once``)."""

    first_status: str = ""
    workload: str = ""
    device: str = ""
    batch: int = 0
    pid: int | None = None
    sent: dict[str, list[Control]] = field(default_factory=dict)  # by key: the controls it sent
    titles: dict[str, str] = field(default_factory=dict)  # the stats panel's title after each step
    marks: set[str] = field(default_factory=set)  # the throughput chart's marker labels, after each change
    new_batch_sample: bool = False
    knobs_screen: bool = False
    cuda_graph_disabled: bool = False
    knob_sample: bool = False
    last_marker: str = ""
    header: str = ""
    traces: list[Path] = field(default_factory=list)
    trace_path: str = ""
    trace_said: str = ""
    alive_after_quit: bool = True
    child_left: bool = True


async def press(app: GpuDashApp, pilot: DashPilot, seen: Seen, *keys: str) -> None:
    """Press ``keys``; the controls they sent are kept in ``seen.sent`` under the first key."""
    before = len(app.controller.sent)
    await pilot.press(*keys)
    seen.sent[keys[0]] = list(app.controller.sent)[before:]


def note_marks(app: GpuDashApp, seen: Seen) -> None:
    """Redraw now and keep the throughput chart's marker labels (a long run scrolls old ones away)."""
    app.refresh_now()
    seen.marks |= {label for _, label in chart(app, "throughput").marker_labels}


async def diagnose_then_double(app: GpuDashApp, pilot: DashPilot, seen: Seen) -> None:
    """d: the diagnosis in the stats' title; +: another configuration, the line goes, the change
    is marked and a sample at the new batch comes."""
    await press(app, pilot, seen, "d")
    await wait_until(pilot, lambda: app.state.last_diagnosis is not None, "the diagnosis", timeout_s=WAIT_S)
    app.refresh_now()
    seen.titles["d"] = str(app.query_one("#stats").border_title)
    batch = seen.batch
    await press(app, pilot, seen, "plus")
    await wait_until(pilot, lambda: changed(app, "batch_size"), "the change event", timeout_s=WAIT_S)
    note_marks(app, seen)
    await wait_until(pilot, lambda: app.state.last_diagnosis is None, "the line to go", timeout_s=WAIT_S)
    app.refresh_now()
    seen.titles["plus"] = str(app.query_one("#stats").border_title or "")
    await wait_until(
        pilot,
        lambda: app.state.run.batch_size == batch * 2 and present(app.state.last_sample).batch_size == batch * 2,
        "a sample at the new batch",
        timeout_s=WAIT_S,
    )
    seen.new_batch_sample = True


async def turn_channels_last_on(app: GpuDashApp, pilot: DashPilot, seen: Seen) -> None:
    """k, tick channels_last, apply: the knob's change, a sample with it, the header."""
    await pilot.press("k")
    seen.knobs_screen = isinstance(app.screen, KnobsScreen)
    seen.cuda_graph_disabled = app.screen.query_one("#knob-cuda_graph").disabled
    await pilot.click("#knob-channels_last")
    before = len(app.controller.sent)
    await pilot.click("#knobs-apply")
    seen.sent["k"] = list(app.controller.sent)[before:]
    await wait_until(pilot, lambda: changed(app, "knobs"), "the knobs' change event", timeout_s=WAIT_S)
    await wait_until(
        pilot,
        lambda: present(app.state.last_sample).knobs == "channels_last=on",
        "a sample with the knob on",
        timeout_s=WAIT_S,
    )
    seen.knob_sample = True
    note_marks(app, seen)
    seen.last_marker = app.state.markers[-1].label
    seen.header = plain_text(app.query_one("#header", Static), 160)


async def trace_a_window(app: GpuDashApp, pilot: DashPilot, seen: Seen, traces: Path) -> None:
    """T: a profiler window of the workload, its file, what the dashboard says of it."""
    await press(app, pilot, seen, "T")
    await wait_until(pilot, lambda: app.state.last_trace is not None, "the window's measured event", timeout_s=WAIT_S)
    note_marks(app, seen)
    seen.traces = list(traces.glob("*.json.gz"))
    note = present(app.state.last_trace).data
    assert isinstance(note, TraceNote)
    seen.trace_path = note.path
    seen.trace_said = app.query_one(MessageBar).text
    seen.titles["T"] = str(app.query_one("#stats").border_title)


async def drive(tmp: Path) -> Seen:
    """The dashboard over a real workload, driven through the steps ``Seen`` keeps."""
    seen = Seen()
    traces = tmp / "traces"
    config = RunConfig(
        workload="encdec",
        variant="serial",
        device="cpu",
        batch_size=2,
        image_size=16,
        sample_interval_s=0.1,
        trace_dir=str(traces),
    )
    prepare_for_child_processes()  # as run_dashboard does, before Textual swaps sys.stderr
    source = EngineSession(config, log_path=str(tmp / "child.log"))
    app = GpuDashApp(source, toasts=False)
    async with app.run_test(size=(160, 40)) as pilot:
        seen.first_status = app.state.status  # the first frame does not wait for torch
        await wait_until(pilot, lambda: app.state.last_sample is not None, "a first sample", timeout_s=WAIT_S)
        seen.workload, seen.device = app.state.run.workload, app.state.device
        seen.batch = present(app.state.run.batch_size)
        await diagnose_then_double(app, pilot, seen)
        await turn_channels_last_on(app, pilot, seen)
        await trace_a_window(app, pilot, seen, traces)
        seen.pid = source.runner.pid
        await pilot.press("q")
        await wait_until(pilot, lambda: not app.is_running, "the app to exit", timeout_s=WAIT_S)
    seen.alive_after_quit = source.alive
    seen.child_left = any(p.pid == seen.pid for p in multiprocessing.active_children())
    return seen


@pytest.fixture(scope="module")
def driven_once(tmp_path_factory: pytest.TempPathFactory) -> Seen:
    """One real workload (a torch import, ~3 s of CPU) under one dashboard, shared by the tests below
    (once per session: its tests may run in two xdist workers)."""
    return once_per_session(
        tmp_path_factory, "test_real_engine-driven", lambda: asyncio.run(drive(tmp_path_factory.mktemp("real-engine")))
    )


@pytest.mark.slow
@pytest.mark.timeout(900)  # the shared fixture's run counts in the first test's time
def test_dashboard_over_the_real_engine_on_the_cpu(driven_once: Seen) -> None:
    seen = driven_once
    assert seen.first_status == "starting"
    assert seen.workload == "encdec" and seen.device == "cpu" and seen.batch >= 1
    assert seen.sent["plus"] == [SetBatchSize(seen.batch * 2)]
    assert f"batch {seen.batch}→{seen.batch * 2}" in seen.marks
    assert seen.new_batch_sample
    assert seen.pid is not None and not seen.alive_after_quit and not seen.child_left


@pytest.mark.slow
@pytest.mark.timeout(900)  # the shared fixture's run counts in the first test's time
def test_the_knobs_panel_changes_the_real_workloads_knobs_on_the_cpu(driven_once: Seen) -> None:
    seen = driven_once
    assert seen.knobs_screen
    assert seen.cuda_graph_disabled  # needs CUDA: this run is on the CPU
    assert seen.sent["k"] == [SetKnobs("channels_last=on")]
    assert seen.knob_sample
    assert seen.last_marker == "+channels_last" and "+channels_last" in seen.marks
    assert "knobs: channels_last" in seen.header


@pytest.mark.slow
@pytest.mark.timeout(900)  # the shared fixture's run counts in the first test's time
def test_the_profile_key_traces_the_real_workload_on_the_cpu(driven_once: Seen) -> None:
    seen = driven_once
    assert seen.sent["T"] == [TraceWindow(20)]
    assert len(seen.traces) == 1 and seen.trace_path == str(seen.traces[0])
    said = seen.trace_said
    assert "ui.perfetto.dev" in said and str(seen.traces[0]) in said and "GPU figures need CUDA" in said
    assert "GPU figures need CUDA" in seen.titles["T"]
    assert "trace" in seen.marks


@pytest.mark.slow
@pytest.mark.timeout(900)  # the shared fixture's run counts in the first test's time
def test_the_diagnose_key_shows_the_verdict_until_the_configuration_changes(driven_once: Seen) -> None:
    seen = driven_once
    assert seen.sent["d"] == [Diagnose()]
    assert "diagnosis: CPU-bound: " in seen.titles["d"]
    assert "diagnosis" not in seen.titles["plus"]  # another batch size: its own diagnosis to take


@pytest.mark.slow
async def test_u_tunes_the_running_workload_and_enter_runs_the_winner_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The dashboard's tune on the CPU: u, a budget, the run pauses while `gpudash tune` races
    exactly what runs (its variant and knobs beside the rest, at its batch, image size and workers)
    in a child; its answer is shown, enter applies the winner to this run, which resumes."""
    monkeypatch.chdir(tmp_path)
    start_tune = GpuDashApp.start_tune

    def short_windows(app: GpuDashApp, minutes: float, *_: float | None) -> None:
        start_tune(app, minutes, seconds=0.3, warmup=0.1)  # tune's windows short: its answer comes sooner

    monkeypatch.setattr(GpuDashApp, "start_tune", short_windows)
    plain = RunConfig(workload="sync_loss", device="cpu", batch_size=8, image_size=32, sample_interval_s=0.25)
    config = dataclasses.replace(plain, variant="fixed", knobs="channels_last=on", workers=0)  # what runs
    async with real_dashboard(tmp_path, config, save_dir=str(tmp_path)) as (app, pilot, _):
        await pilot.press("u")
        assert isinstance(app.screen, PromptScreen)
        await pilot.press("backspace", "1", "enter")  # "5" → "1" minute: a cap the short race mostly ends within
        await wait_until(pilot, lambda: app.state.paused, "the run to pause", timeout_s=30)
        job = present(app.tune_job)
        assert job.request.max_minutes == 1.0 and job.request.seconds == 0.3
        request = job.request  # the run's images, workers, variant and knobs, not the family's defaults
        assert (request.image_size, request.workers, request.current) == (32, 0, "fixed+channels_last"), request
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
        assert "--image-size 32 --workers 0" in result.command  # raced, and to be run, as the run runs
        raced = json.loads((job.out_dir / "tune.json").read_text())
        assert "vs_current" in raced["answer"] or result.winner == "fixed+channels_last", raced["answer"]
        assert any(row.startswith("candidate,fixed+channels_last,") for row in (job.out_dir / "tune.csv").open())
        await pilot.press("enter")
        assert list(app.controller.sent)[-1] == Resume()
        await wait_until(
            pilot,
            lambda: not app.state.paused and app.state.run.variant == result.variant,
            "the winner running here",
            timeout_s=60,
        )
        assert app.controller.knobs.running == Knobs(result.knobs)
