"""Pilot tests: drive the keys, check what a user would see change (fake source, no torch)."""

from __future__ import annotations

import dataclasses

import pytest
from textual.widgets import Static

from gpudash.core.protocol import Event, EventKind, Pause, Resume, Sample, SetBatchSize, SetVariant, SwitchWorkload
from gpudash.core.running import Running
from gpudash.tui.app import STARTING
from gpudash.tui.screens import HelpScreen, PromptScreen
from gpudash.tui.stats_panel import StatsPanel, stats_table
from gpudash.tui.widgets import MessageBar, plain_text
from tests.messages import present

from .conftest import palette_titles, run_palette, wait_until
from .dashboard import SIZE, chart, chart_text, make_app, message, prompt_error, prompt_input, ready, running, shown
from .fakes import NO_GPU, FakeSource, run_segment, started


async def test_first_frame_says_the_workload_is_starting() -> None:
    src = FakeSource()
    app = make_app(src)
    async with app.run_test(size=SIZE) as pilot:
        await ready(app, pilot)
        assert src.started == 1
        assert app.status_text() == STARTING
        assert STARTING in message(app)
        header = shown(app, "#header")
        assert "encdec / serial" in header and "starting workload" in header
        # the charts say why they are empty
        assert chart(app, "throughput").points_drawn == 0


async def test_timer_drains_the_source_without_help() -> None:
    src = FakeSource()
    app = make_app(src)
    async with app.run_test(size=SIZE) as pilot:
        await ready(app, pilot)
        src.push(started(), *run_segment(1.0, 3.0, 100.0))
        await wait_until(pilot, lambda: app.state.last_sample is not None, "the poll timer")
        await wait_until(pilot, lambda: chart(app, "throughput").points_drawn > 0, "the redraw timer")
        assert app.state.status == "running"


async def test_batch_double_reaches_the_engine_and_marks_the_change() -> None:
    async with running(rate=200.0, batch=8) as (pilot, app, src):
        await pilot.press("plus")
        assert src.sent == [SetBatchSize(16)]
        assert "8 → 16 requested" in message(app)
        # the engine applies it and reports the change
        src.push(
            Event(10.0, EventKind.CHANGED, "batch_size", "8", "16", running=Running("encdec", "serial", 16)),
            *run_segment(10.0, 20.0, 120.0, batch=16, steps0=1800),
        )
        app.refresh_now()
        await pilot.pause()
        assert app.state.run.batch_size == 16
        tp = chart(app, "throughput")
        assert (10.0, "batch 8→16") in tp.marker_labels
        assert "batch 8→16" in chart_text(tp)  # the label is drawn on the chart
        # every visible chart carries the marker (one shared time axis)
        assert all((10.0, "batch 8→16") in c.marker_labels for c in app.visible_charts)
        assert "batch_size: 8 → 16" in message(app)
        # ÷2 goes back
        await pilot.press("minus")
        assert src.sent[-1] == SetBatchSize(8)


async def test_stats_panel_shows_the_change_in_percent() -> None:
    async with running(rate=200.0) as (pilot, app, src):
        await pilot.press("p")
        assert src.sent == [SetVariant("pipelined")]
        src.push(
            Event(10.0, EventKind.CHANGED, "variant", "serial", "pipelined"),
            *run_segment(10.0, 20.0, 220.0, variant="pipelined", steps0=2000),
        )
        app.refresh_now()
        await pilot.pause()
        rows = {r.metric.key: r for r in app.state.stat_rows()}
        assert round(present(rows["steps_per_s"].change_pct), 1) == 10.0
        text = plain_text(app.query_one(StatsPanel), 120)
        assert "steps/s +10.0% (+10.0 … +10.0%)" in text  # noise-free fake data: a zero-width interval
        assert rows["steps_per_s"].verdict == 1  # faster, beyond the noise: coloured green
        assert "encdec/pipelined bs8" in text and "encdec/serial bs8" in text
        assert "220" in text and "200" in text


async def test_a_noisy_machine_is_in_the_header_and_takes_the_colour_from_the_verdict() -> None:
    """The same real +10% as above, measured while other processes loaded the CPUs: the header
    says why, the title says the verdict was measured while noisy, and the change is not coloured."""
    async with running(rate=200.0) as (pilot, app, src):
        noise = "host load: other processes kept 1.6 of 2 CPUs busy"
        noisy = [
            dataclasses.replace(m, noise=noise) if isinstance(m, Sample) else m
            for m in run_segment(10.0, 20.0, 220.0, variant="pipelined", steps0=2000)
        ]
        src.push(Event(10.0, EventKind.CHANGED, "variant", "serial", "pipelined"), *noisy)
        app.refresh_now()
        await pilot.pause()
        header = shown(app, "#header", 160)
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
        assert "noisy" not in shown(app, "#header", 160).split("knobs:")[0]


async def test_invalid_batch_input_shows_a_message_and_changes_nothing() -> None:
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
        assert "whole number" in prompt_error(app)
        await pilot.press("ctrl+a", "ctrl+k", "0", "enter")
        assert "at least 1" in prompt_error(app)
        await pilot.press("ctrl+a", "ctrl+k", "3", "2", "enter")
        assert not isinstance(app.screen, PromptScreen)
        assert src.sent == [SetBatchSize(32)]
        # the engine refuses it (out of memory): a message, and the run goes on at batch 1
        src.push(
            Event(10.5, EventKind.ERROR, "batch_size", "1", "32", "CUDA out of memory at batch 32"),
            *run_segment(10.5, 12.0, 200.0, batch=1, steps0=2100),
        )
        app.refresh_now()
        await pilot.pause()
        assert "CUDA out of memory at batch 32" in message(app)
        assert app.query_one(MessageBar).has_class("-error")
        assert app.state.run.batch_size == 1 and app.state.status == "running"


async def test_typed_batch_sizes_are_checked_in_the_prompt() -> None:
    async with running() as (pilot, app, src):
        await pilot.press("b")
        assert isinstance(app.screen, PromptScreen)
        for text, why in (("abc", "whole number"), ("0", "at least 1")):
            prompt_input(app).value = text
            await pilot.press("enter")
            assert why in prompt_error(app)
        assert src.sent == []
        prompt_input(app).value = " 24 "
        await pilot.press("enter")
        await wait_until(pilot, lambda: src.sent == [SetBatchSize(24)], "the parsed batch size sent")


async def test_pipelining_on_the_cpu_says_it_needs_cuda() -> None:
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


async def test_cycle_variant_and_switch_workload() -> None:
    async with running() as (pilot, app, src):
        await pilot.press("v")
        assert src.sent == [SetVariant("pipelined")]
        await pilot.press("w")
        await pilot.pause()
        await pilot.press("down", "enter")  # the list opens on encdec; next is augment
        assert src.sent[-1] == SwitchWorkload("augment")


async def test_pause_and_resume() -> None:
    async with running() as (pilot, app, src):
        await pilot.press("space")
        assert src.sent == [Pause()]
        src.push(Event(10.0, EventKind.PAUSED))
        app.refresh_now()
        assert app.status_text() == "paused"
        await pilot.press("space")
        assert src.sent == [Pause(), Resume()]


async def test_crash_shows_why_and_restart_starts_again() -> None:
    async with running() as (pilot, app, src):
        assert app.check_action("restart", ()) is False  # hidden while running
        src.push(Event(10.0, EventKind.CRASHED, message="workload process killed by SIGKILL"))
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


async def test_r_while_the_workload_runs_says_why_it_does_nothing() -> None:
    async with running() as (pilot, app, src):
        await pilot.press("r")
        await pilot.pause()
        assert "r restarts the workload after a crash, a stop or a hang; it is running now" in message(app)
        assert not src.restarted  # nothing was restarted


async def test_help_and_command_palette_list_the_controls() -> None:
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
        text = plain_text(app.screen.query_one(Static), 100)
        assert "kernel-active" in text and "not SM occupancy" in text and "ctrl+p" in text
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)


@pytest.mark.slow
async def test_command_palette_runs_a_control() -> None:
    async with running() as (pilot, app, src):
        await run_palette(pilot, app, "toggle pipelining", "Toggle pipelining")
        await wait_until(pilot, lambda: src.sent == [SetVariant("pipelined")], "the control")


def test_dashboard_modules_import_neither_torch_nor_the_engine_child() -> None:
    import subprocess
    import sys

    code = (
        "import sys, gpudash.tui.app, gpudash.tui.demo, gpudash.recording.replay, gpudash.tui.state\n"
        "assert 'torch' not in sys.modules, 'torch imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
    code = "import sys, gpudash.recording.replay, gpudash.tui.state\nassert 'textual' not in sys.modules\n"
    subprocess.run([sys.executable, "-c", code], check=True)
