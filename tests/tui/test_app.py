"""Pilot tests: drive the keys, check what a user would see change (fake source, no torch)."""

from __future__ import annotations

import csv
import dataclasses
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pandas as pd
from textual.pilot import Pilot

from gpudash.core.protocol import Event, Pause, Resume, SetBatchSize, SetKnob, SetKnobs, SetVariant, SwitchWorkload
from gpudash.recording.replay import ReplaySource
from gpudash.tui.app import STARTING, GpuDashApp
from gpudash.tui.charts import MetricChart
from gpudash.tui.screens import HelpScreen, KnobsScreen, PromptScreen
from gpudash.tui.widgets import MessageBar, StatsPanel, plain_text, stats_table

from .conftest import palette_titles, replay_loaded, run_palette, wait_until
from .fakes import NO_GPU, FakeSource, run_segment, started
from .test_replay import write_with_malformed_rows

SIZE = (120, 36)
FIXTURE = Path(__file__).parent / "data" / "replay.csv"


def make_app(source=None, **kw) -> GpuDashApp:
    kw.setdefault("toasts", False)
    return GpuDashApp(source or FakeSource(), clock=lambda: 0.0, **kw)


async def ready(app, pilot) -> None:
    await wait_until(pilot, lambda: app.source_ready, "the source to start")


def message(app) -> str:
    return app.query_one(MessageBar).text


def chart(app, name: str) -> MetricChart:
    return app.query_one(f"#chart-{name}", MetricChart)


async def running_app(pilot, app, src, rate=200.0, batch=8, until=10.0) -> None:
    await ready(app, pilot)
    src.push(started(1.0, batch=batch), *run_segment(1.0, until, rate, batch=batch))
    app.refresh_now()
    await pilot.pause()


@asynccontextmanager
async def running(
    src: FakeSource | None = None, start: Callable[..., Awaitable[None]] | None = None, **kw
) -> AsyncIterator[tuple[Pilot, GpuDashApp, FakeSource]]:
    """A dashboard at SIZE over ``src`` (a new FakeSource if None), once ``start(pilot, app, src, **kw)``
    (``running_app`` if None) has run: (the pilot, the app, its source)."""
    src = FakeSource() if src is None else src
    app = make_app(src)
    async with app.run_test(size=SIZE) as pilot:
        await (start or running_app)(pilot, app, src, **kw)
        yield pilot, app, src


async def pipelined_after_serial(pilot, app, src, rate: float, steps0: int) -> None:
    """200 steps/s (serial, batch 8) from 1 s to 10 s, then pipelined at ``rate`` to 20 s, with a change marker."""
    await running_app(pilot, app, src, rate=200.0)
    src.push(
        Event(10.0, "changed", "variant", "serial", "pipelined"),
        *run_segment(10.0, 20.0, rate, variant="pipelined", steps0=steps0),
    )
    app.refresh_now()
    await pilot.pause()


async def test_first_frame_says_the_workload_is_starting():
    src = FakeSource()
    app = make_app(src)
    async with app.run_test(size=SIZE) as pilot:
        await ready(app, pilot)
        assert src.started == 1
        assert app.status_text() == STARTING
        assert STARTING in message(app)
        header = plain_text(app.query_one("#header"), 120)
        assert "encdec / serial" in header and "starting workload" in header
        # the charts say why they are empty
        assert chart(app, "throughput").points_drawn == 0


async def test_timer_drains_the_source_without_help():
    src = FakeSource()
    app = make_app(src)
    async with app.run_test(size=SIZE) as pilot:
        await ready(app, pilot)
        src.push(started(), *run_segment(1.0, 3.0, 100.0))
        await wait_until(pilot, lambda: app.state.last_sample is not None, "the poll timer")
        await wait_until(pilot, lambda: chart(app, "throughput").points_drawn > 0, "the redraw timer")
        assert app.state.status == "running"


async def test_batch_double_reaches_the_engine_and_marks_the_change():
    async with running(rate=200.0, batch=8) as (pilot, app, src):
        await pilot.press("plus")
        assert src.sent == [SetBatchSize(16)]
        assert "8 → 16 requested" in message(app)
        # the engine applies it and reports the change
        src.push(
            Event(
                10.0,
                "changed",
                "batch_size",
                "8",
                "16",
                details={"workload": "encdec", "variant": "serial", "batch_size": "16"},
            ),
            *run_segment(10.0, 20.0, 120.0, batch=16, steps0=1800),
        )
        app.refresh_now()
        await pilot.pause()
        assert app.state.run.batch_size == 16
        tp = chart(app, "throughput")
        assert (10.0, "batch 8→16") in tp.marker_labels
        assert "batch 8→16" in tp.render().plain  # the label is drawn on the chart
        # every visible chart carries the marker (one shared time axis)
        assert all((10.0, "batch 8→16") in c.marker_labels for c in app.visible_charts)
        assert "batch_size: 8 → 16" in message(app)
        # ÷2 goes back
        await pilot.press("minus")
        assert src.sent[-1] == SetBatchSize(8)


async def test_stats_panel_shows_the_change_in_percent():
    async with running(rate=200.0) as (pilot, app, src):
        await pilot.press("p")
        assert src.sent == [SetVariant("pipelined")]
        src.push(
            Event(10.0, "changed", "variant", "serial", "pipelined"),
            *run_segment(10.0, 20.0, 220.0, variant="pipelined", steps0=2000),
        )
        app.refresh_now()
        await pilot.pause()
        rows = {r.metric.key: r for r in app.state.stat_rows()}
        assert round(rows["steps_per_s"].change_pct, 1) == 10.0
        text = plain_text(app.query_one(StatsPanel), 120)
        assert "steps/s +10.0% (+10.0 … +10.0%)" in text  # noise-free fake data: a zero-width interval
        assert rows["steps_per_s"].verdict == 1  # faster, beyond the noise: coloured green
        assert "encdec/pipelined bs8" in text and "encdec/serial bs8" in text
        assert "220" in text and "200" in text


async def test_a_noisy_machine_is_in_the_header_and_takes_the_colour_from_the_verdict():
    """The same real +10% as above, measured while other processes loaded the CPUs: the header
    says why, the title says the verdict was measured while noisy, and the change is not coloured."""
    async with running(rate=200.0) as (pilot, app, src):
        noise = "host load: other processes kept 1.6 of 2 CPUs busy"
        noisy = [
            dataclasses.replace(m, noise=noise) if hasattr(m, "noise") else m  # the samples
            for m in run_segment(10.0, 20.0, 220.0, variant="pipelined", steps0=2000)
        ]
        src.push(Event(10.0, "changed", "variant", "serial", "pipelined"), *noisy)
        app.refresh_now()
        await pilot.pause()
        header = plain_text(app.query_one("#header"), 160)
        assert "⚠ noisy" in header and noise in header
        rows = {r.metric.key: r for r in app.state.stat_rows()}
        assert rows["steps_per_s"].verdict == 1 and rows["steps_per_s"].noisy
        table = stats_table(app.state)
        assert "measured while noisy: 100% of samples (host load)" in table.title.plain
        change = dict(table.rows)["change"][[r.metric.key for r in app.state.stat_rows()].index("steps_per_s")]
        assert change.plain == "+10.0%" and "green" not in str(change.style) and "red" not in str(change.style)
        src.push(*run_segment(20.0, 21.0, 220.0, variant="pipelined", steps0=4200))  # quiet again
        app.refresh_now()
        await pilot.pause()
        assert "noisy" not in plain_text(app.query_one("#header"), 160).split("knobs:")[0]


async def test_invalid_batch_input_shows_a_message_and_changes_nothing():
    async with running(batch=1) as (pilot, app, src):
        # ÷2 at batch 1
        await pilot.press("minus")
        assert src.sent == []
        assert "already 1" in message(app)
        assert app.query_one(MessageBar).has_class("-error")
        # typed: letters, then 0, are refused in the prompt
        await pilot.press("b")
        assert isinstance(app.screen, PromptScreen)
        await pilot.press("a", "b", "c", "enter")
        assert isinstance(app.screen, PromptScreen)
        assert "whole number" in str(app.screen.query_one("#prompt-error").content)
        await pilot.press("ctrl+a", "ctrl+k", "0", "enter")
        assert "at least 1" in str(app.screen.query_one("#prompt-error").content)
        await pilot.press("ctrl+a", "ctrl+k", "3", "2", "enter")
        assert not isinstance(app.screen, PromptScreen)
        assert src.sent == [SetBatchSize(32)]
        # the engine refuses it (out of memory): a message, and the run goes on at batch 1
        src.push(
            Event(10.5, "error", "batch_size", "1", "32", "CUDA out of memory at batch 32"),
            *run_segment(10.5, 12.0, 200.0, batch=1, steps0=2100),
        )
        app.refresh_now()
        await pilot.pause()
        assert "CUDA out of memory at batch 32" in message(app)
        assert app.query_one(MessageBar).has_class("-error")
        assert app.state.run.batch_size == 1 and app.state.status == "running"


async def test_typed_batch_sizes_are_checked_in_the_prompt():
    async with running() as (pilot, app, src):
        await pilot.press("b")
        assert isinstance(app.screen, PromptScreen)
        for text, why in (("abc", "whole number"), ("0", "at least 1")):
            app.screen.query_one("#prompt-input").value = text
            await pilot.press("enter")
            assert why in str(app.screen.query_one("#prompt-error").content)
        assert src.sent == []
        app.screen.query_one("#prompt-input").value = " 24 "
        await pilot.press("enter")
        await wait_until(pilot, lambda: src.sent == [SetBatchSize(24)], "the parsed batch size sent")


async def test_pipelining_on_the_cpu_says_it_needs_cuda():
    src = FakeSource(gpu_info=NO_GPU)
    app = make_app(src)
    async with app.run_test(size=SIZE) as pilot:
        await ready(app, pilot)
        src.push(started(device="cpu"), *run_segment(1.0, 5.0, 20.0))
        app.refresh_now()
        await pilot.pause()
        await pilot.press("p")
        assert src.sent == []
        assert "needs CUDA" in message(app)
        # v cycles to the next variant that can run here: none for encdec on the CPU
        await pilot.press("v")
        assert src.sent == []
        assert "need CUDA" in message(app)


async def test_cycle_variant_and_switch_workload():
    async with running() as (pilot, app, src):
        await pilot.press("v")
        assert src.sent == [SetVariant("pipelined")]
        await pilot.press("w")
        await pilot.pause()
        await pilot.press("down", "enter")  # the list opens on encdec; next is augment
        assert src.sent[-1] == SwitchWorkload("augment")


async def test_pause_and_resume():
    async with running() as (pilot, app, src):
        await pilot.press("space")
        assert src.sent == [Pause()]
        src.push(Event(10.0, "paused"))
        app.refresh_now()
        assert app.status_text() == "paused"
        await pilot.press("space")
        assert src.sent == [Pause(), Resume()]


async def test_crash_shows_why_and_restart_starts_again():
    async with running() as (pilot, app, src):
        assert app.check_action("restart", ()) is False  # hidden while running
        src.push(Event(10.0, "crashed", message="workload process killed by SIGKILL"))
        app.refresh_now()
        await pilot.pause()
        assert "killed by SIGKILL" in message(app) and "press r" in message(app)
        assert "crashed" in app.status_text()
        assert (10.0, "crashed") in chart(app, "throughput").marker_labels
        await pilot.press("plus")  # controls say why nothing happens
        assert src.sent == [] and "not running" in message(app)
        await pilot.press("r")
        await wait_until(pilot, lambda: src.restarted == 1 and app.source_ready, "the restart")
        assert app.status_text() == STARTING


async def test_recording_writes_the_record_format(tmp_path):
    src = FakeSource()
    # what EngineSession keeps of the child's "started" event: a recording started mid-run
    # (after that event went by) must still carry it in its JSON
    src.started_details = {
        "workload": "encdec",
        "variant": "serial",
        "batch_size": "8",
        "device": "cuda:0",
        "torch": "2.5.1",
        "cuda": "12.4",
        "device_name": "NVIDIA H100 80GB HBM3",
    }
    app = make_app(src)
    out = tmp_path / "rec.csv"
    async with app.run_test(size=SIZE) as pilot:
        await running_app(pilot, app, src)
        await pilot.press("c")
        assert isinstance(app.screen, PromptScreen)
        assert app.screen.query_one("#prompt-input").value.startswith("gpudash-encdec-")
        app.screen.query_one("#prompt-input").value = str(out)
        await pilot.press("enter")
        assert app.controller.recording_path == str(out)
        assert "● REC" in plain_text(app.query_one("#header"), 120)
        src.push(
            *run_segment(10.0, 12.0, 200.0, steps0=2000),
            Event(12.0, "changed", "batch_size", "8", "16"),
            *run_segment(12.0, 13.0, 120.0, batch=16, steps0=2400),
        )
        app.refresh_now()
        await pilot.press("c")
        assert app.controller.recorder is None
        assert "saved" in message(app)
        assert "● REC" not in plain_text(app.query_one("#header"), 120)
    rows = list(csv.DictReader(out.open()))
    kinds = [r["row_kind"] for r in rows]
    assert kinds == ["sample"] * 8 + ["summary", "event"] + ["sample"] * 4 + ["summary"]  # a summary per config
    events = [r for r in rows if r["row_kind"] != "sample"]
    assert events[1]["event_kind"] == "changed" and events[1]["event_after"] == "16"
    assert [r["batch_size"] for r in events[::2]] == ["8", "16"]
    meta = json.loads(out.with_suffix(".json").read_text())
    assert meta["torch_version"] == "2.5.1" and meta["cuda_version"] == "12.4"
    assert meta["device_name"] == "NVIDIA H100 80GB HBM3" and meta["device"] == "cuda:0"
    assert meta["started"]["torch"] == "2.5.1"
    assert meta["recording_started_at_run_s"] == 10.0


async def test_recording_to_a_bad_path_says_so(tmp_path):
    async with running() as (pilot, app, src):
        await pilot.press("c")
        app.screen.query_one("#prompt-input").value = str(tmp_path / "nope" / "x.csv")
        await pilot.press("enter")
        assert "does not exist" in str(app.screen.query_one("#prompt-error").content)
        await pilot.press("escape")
        assert app.controller.recorder is None


async def test_quit_stops_the_source_and_closes_the_recording(tmp_path):
    async with running() as (pilot, app, src):
        app.start_recording(str(tmp_path / "q.csv"))
        src.push(*run_segment(10.0, 12.0, 200.0, steps0=2000))  # 8 samples, 4 GPU ticks
        app.refresh_now()
        await pilot.press("q")
        await pilot.pause()
    assert src.stopped >= 1
    assert app.controller.recorder is None
    assert app.return_value == 0
    df = pd.read_csv(tmp_path / "q.csv")
    samples = df[df["row_kind"] == "sample"]
    assert len(samples) == 8  # every sample pushed before quitting made it to the file
    assert samples["time_s"].tolist() == [10.25 + 0.25 * i for i in range(8)]
    assert (samples["steps_per_s"] == 200.0).all() and (samples["batch_size"] == 8).all()
    assert samples["steps"].tolist() == [2000 + 50 * (i + 1) for i in range(8)]
    # the GPU ticks were joined in from the first tick the recording saw (after the 10.5 s sample)
    assert samples["power_w"].iloc[2:].notna().all()
    meta = json.loads((tmp_path / "q.json").read_text())
    assert meta["end_time"]  # close() ran on quit: the recording is marked finished
    assert meta["rows"] >= len(df)


async def test_no_nvml_says_why_the_gpu_panel_is_empty():
    src = FakeSource(gpu_info=NO_GPU)
    app = make_app(src)
    async with app.run_test(size=SIZE) as pilot:
        await ready(app, pilot)
        src.push(started(device="cpu"), *run_segment(1.0, 5.0, 20.0, syncs=None))
        app.refresh_now()
        await pilot.pause()
        notice = app.query_one("#gpu-notice")
        assert notice.display
        assert "NVML unavailable: NVML Shared Library Not Found" in plain_text(notice, 120)
        assert not chart(app, "gpu_util").display and not chart(app, "power").display
        assert "NVML unavailable" in plain_text(app.query_one("#header"), 120)
        assert "kernel%" not in plain_text(app.query_one(StatsPanel), 120)


async def test_more_charts_when_the_terminal_is_tall():
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(app, pilot)
        assert len(app.visible_charts) == 4
    app = make_app()
    async with app.run_test(size=(140, 48)) as pilot:
        await ready(app, pilot)
        assert len(app.visible_charts) == 6


async def test_long_run_stays_bounded():
    src = FakeSource()
    app = make_app(src, maxlen=300)
    async with app.run_test(size=SIZE) as pilot:
        await ready(app, pilot)
        src.push(started(), *run_segment(1.0, 1001.0, 200.0))  # 4000 samples
        app.refresh_now()
        await pilot.pause()
        assert len(app.state.series["steps_per_s"]) == 300
        tp = chart(app, "throughput")
        assert 0 < tp.points_drawn <= 2 * 2 * tp.size.width
        t0, t1 = app.state.time_range()
        assert t1 == 1001.0 and t0 > 900


async def test_help_and_command_palette_list_the_controls():
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(app, pilot)
        listed = {
            "Toggle pipelining (p)",
            "Batch size ×2 (+)",
            "Start / stop recording to CSV (c)",
            "Pause / resume (space)",
        }
        assert listed <= palette_titles(app)
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        text = plain_text(app.screen.query_one("Static"), 100)
        assert "kernel-active" in text and "not SM occupancy" in text and "ctrl+p" in text
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)


async def test_replay_shows_markers_and_stats_read_only():
    src = ReplaySource(FIXTURE)
    app = make_app(src)
    assert app.replay
    async with app.run_test(size=SIZE) as pilot:
        await replay_loaded(pilot, app)
        app.refresh_now()
        await pilot.pause()
        labels = [label for _, label in chart(app, "throughput").marker_labels]
        assert labels == ["serial→pipelined", "batch 8→16", "pipelined→serial"]
        assert app.state.current.key == ("encdec", "serial", 16, "none")
        assert app.state.previous.key == ("encdec", "pipelined", 16, "none")
        assert "replay" in app.status_text()
        assert app.check_action("batch_double", ()) is False
        await pilot.press("plus", "p", "c")
        assert app.controller.recorder is None and app.state.run.batch_size == 16
        assert not any("Batch" in t or "pipelining" in t or t.startswith("Knob") for t in palette_titles(app))
        assert "knobs: none" in plain_text(app.query_one("#header"), 120)  # shown, not settable
        await pilot.press("k")
        assert not isinstance(app.screen, KnobsScreen)
        assert "H100" in plain_text(app.query_one("#header"), 120)


async def test_replay_says_how_many_malformed_rows_it_skipped(tmp_path):
    p = tmp_path / "bad.csv"
    write_with_malformed_rows(p)
    app = make_app(ReplaySource(p))
    async with app.run_test(size=SIZE) as pilot:
        await replay_loaded(pilot, app)
        app.refresh_now()
        await pilot.pause()
        assert message(app) == "replay: 2 malformed rows skipped"
        assert app.state.last_sample is not None and app.state.last_sample.time_s == 1.5


async def test_charts_fall_back_to_plotexts_public_build_when_its_internals_are_gone(monkeypatch):
    import gpudash.tui.plotext_adapter as adapter

    async with running() as (pilot, app, src):
        c = chart(app, "throughput")
        fast = c.render()
        # a plotext without the private module the fast path reads (as after an upgrade)
        monkeypatch.setattr(adapter, "_utility", None)  # its internals gone at run time
        monkeypatch.setattr(adapter, "_STYLES", {})
        slow = c.render()
        assert c._fast_render is False
        assert slow.plain.rstrip("\n") == fast.plain.rstrip("\n")
        assert c.spec.title[:8] in slow.plain
        assert any("\u2800" < ch <= "\u28ff" for ch in slow.plain)  # the braille line is drawn


async def test_command_palette_runs_a_control():
    async with running() as (pilot, app, src):
        await run_palette(pilot, app, "toggle pipelining", "Toggle pipelining")
        await wait_until(pilot, lambda: src.sent == [SetVariant("pipelined")], "the control")


async def cpu_app(pilot, app, src) -> None:
    await ready(app, pilot)
    src.push(started(device="cpu"), *run_segment(1.0, 5.0, 20.0, syncs=None))
    app.refresh_now()
    await pilot.pause()


async def test_the_knobs_panel_applies_every_knob_at_once_and_the_change_is_marked():
    async with running(FakeSource(gpu_info=NO_GPU), start=cpu_app) as (pilot, app, src):
        assert "knobs: none" in plain_text(app.query_one("#header"), 120)
        await pilot.press("k")
        assert isinstance(app.screen, KnobsScreen)
        await pilot.click("#knob-channels_last")
        app.screen.query_one("#knob-amp").value = "bf16"
        await pilot.click("#knobs-apply")
        assert not isinstance(app.screen, KnobsScreen)
        assert src.sent == [SetKnobs("amp=bf16,channels_last=on")]  # one control: one rebuild
        assert "knobs none → amp=bf16,channels_last=on requested" in message(app)
        src.push(
            Event(
                5.0,
                "changed",
                "knobs",
                "none",
                "amp=bf16,channels_last=on",
                details={"knobs": "amp=bf16,channels_last=on"},
            ),
            *run_segment(5.0, 8.0, 25.0, syncs=None, steps0=100, knobs="amp=bf16,channels_last=on"),
        )
        app.refresh_now()
        await pilot.pause()
        assert "knobs: amp=bf16, channels_last" in plain_text(app.query_one("#header"), 120)
        assert (5.0, "+amp=bf16 +channels_last") in chart(app, "throughput").marker_labels
        assert "[amp=bf16,channels_last=on]" in plain_text(app.query_one(StatsPanel), 120)
        # the panel opens on what runs; escape cancels
        await pilot.press("k")
        assert app.screen.query_one("#knob-channels_last").value is True
        await pilot.press("escape")
        assert not isinstance(app.screen, KnobsScreen) and len(src.sent) == 1


async def test_the_knobs_panel_works_from_the_keyboard_alone():
    async with running(FakeSource(gpu_info=NO_GPU), start=cpu_app) as (pilot, app, src):
        await pilot.press("k")
        assert app.screen.focused is app.screen.query_one("#knob-amp")  # the first knob that can change
        await pilot.press("tab", "space", "a")  # to channels_last, tick it, apply
        assert not isinstance(app.screen, KnobsScreen)
        assert src.sent == [SetKnobs("channels_last=on")]


async def test_cuda_only_knobs_are_disabled_on_the_cpu_and_refused_with_one_line():
    src = FakeSource(gpu_info=NO_GPU)
    app = make_app(src)
    async with app.run_test(size=(80, 24)) as pilot:
        await cpu_app(pilot, app, src)
        await pilot.press("k")
        panel = app.screen
        for name in ("cudnn_benchmark", "tf32", "cuda_graph"):
            assert panel.query_one(f"#knob-{name}").disabled
        assert not panel.query_one("#knob-channels_last").disabled
        refused = [str(label.content) for label in panel.query(".knob-about.-refused")]
        assert any("knob cuda_graph needs CUDA" in text for text in refused)
        for name in ("ddp_bucket_mb", "ddp_grad_view", "ddp_static_graph", "ddp_no_sync"):  # no --nproc here
            assert panel.query_one(f"#knob-{name}").disabled
        assert any(
            "knob ddp_no_sync is a DistributedDataParallel setting: it needs --nproc 2 or more" in text
            for text in refused
        )
        await pilot.press("escape")
        # through the palette: the catalog's reason at once, nothing sent, the run goes on
        await run_palette(pilot, app, "cuda_graph", "Knob: turn cuda_graph on/off")
        await wait_until(pilot, lambda: "needs CUDA" in message(app), "the refusal")
        assert src.sent == [] and app.query_one(MessageBar).has_class("-error")
        assert "\n" not in message(app) and app.state.status == "running"


async def test_the_palette_lists_every_knob_and_sets_one():
    async with running(FakeSource(gpu_info=NO_GPU), start=cpu_app) as (pilot, app, src):
        knobs = (
            "turn channels_last on/off",
            "amp=bf16",
            "compile=off",
            "compile=max-autotune",
            "turn cuda_graph on/off",
        )
        assert {"Knobs panel (k)", *(f"Knob: {k}" for k in knobs)} <= palette_titles(app)
        await run_palette(pilot, app, "compile=max-autotune", "Knob: compile=max-autotune")
        await wait_until(pilot, lambda: src.sent == [SetKnob("compile", "max-autotune")], "the control")


async def test_a_knob_change_reaches_the_recording(tmp_path):
    src = FakeSource(gpu_info=NO_GPU)
    app = make_app(src)
    out = tmp_path / "knobs.csv"
    async with app.run_test(size=SIZE) as pilot:
        await cpu_app(pilot, app, src)
        app.start_recording(str(out))
        app.set_knob("channels_last", "on")
        src.push(
            Event(5.0, "changed", "knobs", "none", "channels_last=on", details={"knobs": "channels_last=on"}),
            *run_segment(5.0, 6.0, 20.0, syncs=None, steps0=100, knobs="channels_last=on"),
        )
        app.refresh_now()
        await pilot.press("c")
    rows = list(csv.DictReader(out.open()))
    change = [r for r in rows if r["row_kind"] == "event"][0]
    assert (change["event_what"], change["event_after"]) == ("knobs", "channels_last=on")
    assert [r["knobs"] for r in rows if r["row_kind"] == "sample"] == ["channels_last=on"] * 4
    assert json.loads(out.with_suffix(".json").read_text())["running_at_start"]["knobs"] == "none"


async def test_a_slow_knob_shows_its_progress_until_the_change_arrives():
    async with running() as (pilot, app, src):
        app.set_knob("compile", "default")
        assert "(compiling first)" in message(app)
        app.ingest([Event(10.0, "progress", "knobs", message="compiling… 12 s")])
        app.refresh_now()
        await pilot.pause()
        assert message(app).startswith("compiling… 12 s — applying knobs compile=default")
        assert "compiling… 12 s" in plain_text(app.query_one("#header"), 120)
        app.ingest([Event(11.0, "changed", "knobs", "none", "compile=default", details={"knobs": "compile=default"})])
        app.refresh_now()
        await pilot.pause()
        header = plain_text(app.query_one("#header"), 120)
        assert "compiling" not in header and "running" in header and "knobs: compile=default" in header


def test_dashboard_modules_import_neither_torch_nor_the_engine_child():
    import subprocess
    import sys

    code = (
        "import sys, gpudash.tui.app, gpudash.tui.demo, gpudash.recording.replay, gpudash.tui.state\n"
        "assert 'torch' not in sys.modules, 'torch imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
    code = "import sys, gpudash.recording.replay, gpudash.tui.state\nassert 'textual' not in sys.modules\n"
    subprocess.run([sys.executable, "-c", code], check=True)


# -- profiler windows (T) --------------------------------------------------------------------------
async def test_the_profile_key_asks_for_a_window_and_shows_its_figures_and_marker():
    from gpudash.core.protocol import RunConfig, TraceWindow

    from ..test_controller import TRACE_PATH, trace_event

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


async def test_the_last_trace_line_is_readable_at_80x24():
    from gpudash.core.protocol import RunConfig

    from ..test_controller import trace_event

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


async def test_the_profile_key_says_why_not_without_a_trace_dir_and_in_a_replay():
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


async def test_the_palette_asks_for_a_profiler_window():
    from gpudash.core.protocol import RunConfig, TraceWindow

    async with running(FakeSource(RunConfig(trace_dir="/runs/gpudash-traces"))) as (pilot, app, src):
        assert "Profile 20 steps (torch.profiler window) (T)" in palette_titles(app)
        await run_palette(pilot, app, "profile 20", "Profile 20 steps")
        await wait_until(pilot, lambda: src.sent == [TraceWindow(20)], "the control")
        assert message(app).startswith("profiling 20 steps…")


def test_a_live_dashboard_run_gets_a_trace_directory(tmp_path):
    from gpudash.core.protocol import RunConfig
    from gpudash.tui.app import with_trace_dir

    assert with_trace_dir(RunConfig(), cwd=str(tmp_path)).trace_dir == str(tmp_path / "gpudash-traces")
    assert with_trace_dir(RunConfig(trace_dir="/x")).trace_dir == "/x"
    assert not (tmp_path / "gpudash-traces").exists()  # made by the engine when a window is taken


# -- data-parallel runs (--nproc) -------------------------------------------------------------------
async def test_a_data_parallel_run_shows_its_ranks_and_asks_for_its_scaling_efficiency():
    import dataclasses

    from gpudash.core.protocol import EventKind, MeasureScaling, RunConfig

    async with running(FakeSource(RunConfig(nproc=2)), until=4.0) as (pilot, app, src):
        last = app.state.last_sample
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


async def test_the_scaling_key_says_why_not_without_ranks():
    async with running(until=4.0) as (pilot, app, src):
        await pilot.press("e")
        assert "needs a data-parallel run" in message(app) and not src.sent
        assert app.query_one(StatsPanel).border_title is None


async def test_r_while_the_workload_runs_says_why_it_does_nothing():
    async with running() as (pilot, app, src):
        await pilot.press("r")
        await pilot.pause()
        assert "r restarts the workload after a crash, a stop or a hang; it is running now" in message(app)
        assert not src.restarted  # nothing was restarted


async def test_a_toast_does_not_cover_the_stats():
    src = FakeSource()
    app = make_app(src, toasts=True)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await running_app(pilot, app, src)
        app.notify("a message long enough to be seen", timeout=30)

        def toasts() -> list:  # Textual's Toast widgets, by type name: the class is not public
            return [w for w in app.screen.walk_children(with_self=False) if type(w).__name__ == "Toast"]

        await wait_until(pilot, lambda: bool(toasts()), "the toast")
        await pilot.pause()
        toast = toasts()[0].region
        stats = app.query_one(StatsPanel).region
        assert toast.area > 0 and not toast.overlaps(stats), (toast, stats)


async def test_at_40x12_the_knobs_panel_scrolls_and_its_apply_button_is_on_screen():
    src = FakeSource()
    app = make_app(src)
    async with app.run_test(size=(40, 12)) as pilot:
        await running_app(pilot, app, src)
        await pilot.press("k")
        await wait_until(pilot, lambda: isinstance(app.screen, KnobsScreen), "the knobs panel")
        await pilot.pause()
        apply = app.screen.query_one("#knobs-apply").region
        screen = app.screen.region
        assert apply.height > 0 and screen.contains_region(apply), (apply, screen)
        rows = app.screen.query_one("#knob-rows")
        assert rows.region.height > 0 and rows.max_scroll_y > 0  # the knobs scroll above it
