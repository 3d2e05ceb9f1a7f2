"""Pilot tests of the knobs: the panel (mouse, keyboard, a small terminal), the palette's knob
commands, the CUDA-only knobs refused on the CPU, a slow knob's progress (fake source, no torch)."""

from __future__ import annotations

import pytest
from textual.widgets import Label, Select

from gpudash.core.protocol import Event, EventKind, SetKnob, SetKnobs
from gpudash.tui.screens import KnobsScreen
from gpudash.tui.stats_panel import StatsPanel
from gpudash.tui.widgets import MessageBar, plain_text

from .conftest import palette_titles, run_palette, wait_until
from .dashboard import chart, cpu_app, make_app, message, running, running_app, shown
from .fakes import NO_GPU, FakeSource, run_segment


@pytest.mark.slow
async def test_the_knobs_panel_applies_every_knob_at_once_and_the_change_is_marked() -> None:
    async with running(FakeSource(gpu_info=NO_GPU), start=cpu_app) as (pilot, app, src):
        assert "knobs: none" in shown(app, "#header")
        await pilot.press("k")
        assert isinstance(app.screen, KnobsScreen)
        await pilot.click("#knob-channels_last")
        app.screen.query_one("#knob-amp", Select).value = "bf16"
        await pilot.click("#knobs-apply")
        assert not isinstance(app.screen, KnobsScreen)
        assert src.sent == [SetKnobs("amp=bf16,channels_last=on")]  # one control: one rebuild
        assert "knobs none → amp=bf16,channels_last=on requested" in message(app)
        src.push(
            Event(
                5.0,
                EventKind.CHANGED,
                "knobs",
                "none",
                "amp=bf16,channels_last=on",
                details={"knobs": "amp=bf16,channels_last=on"},
            ),
            *run_segment(5.0, 8.0, 25.0, syncs=None, steps0=100, knobs="amp=bf16,channels_last=on"),
        )
        app.refresh_now()
        await pilot.pause()
        assert "knobs: amp=bf16, channels_last" in shown(app, "#header")
        assert (5.0, "+amp=bf16 +channels_last") in chart(app, "throughput").marker_labels
        assert "[amp=bf16,channels_last=on]" in plain_text(app.query_one(StatsPanel), 120)
        # the panel opens on what runs; escape cancels
        await pilot.press("k")
        assert app.screen.query_one("#knob-channels_last").value is True
        await pilot.press("escape")
        assert not isinstance(app.screen, KnobsScreen) and len(src.sent) == 1


async def test_the_knobs_panel_works_from_the_keyboard_alone() -> None:
    async with running(FakeSource(gpu_info=NO_GPU), start=cpu_app) as (pilot, app, src):
        await pilot.press("k")
        assert app.screen.focused is app.screen.query_one("#knob-amp")  # the first knob that can change
        await pilot.press("tab", "space", "a")  # to channels_last, tick it, apply
        assert not isinstance(app.screen, KnobsScreen)
        assert src.sent == [SetKnobs("channels_last=on")]


@pytest.mark.slow
async def test_cuda_only_knobs_are_disabled_on_the_cpu_and_refused_with_one_line() -> None:
    src = FakeSource(gpu_info=NO_GPU)
    app = make_app(src)
    async with app.run_test(size=(80, 24)) as pilot:
        await cpu_app(pilot, app, src)
        await pilot.press("k")
        panel = app.screen
        for name in ("cudnn_benchmark", "tf32", "cuda_graph"):
            assert panel.query_one(f"#knob-{name}").disabled
        assert not panel.query_one("#knob-channels_last").disabled
        refused = [str(label.content) for label in panel.query(".knob-about.-refused").results(Label)]
        assert any("knob cuda_graph needs CUDA" in text for text in refused)
        for name in ("ddp_bucket_mb", "ddp_torch_defaults", "ddp_no_sync"):  # no --nproc here
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


@pytest.mark.slow
async def test_the_palette_lists_every_knob_and_sets_one() -> None:
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


async def test_a_slow_knob_shows_its_progress_until_the_change_arrives() -> None:
    async with running() as (pilot, app, src):
        app.set_knob("compile", "default")
        assert "(compiling first)" in message(app)
        app.ingest([Event(10.0, EventKind.PROGRESS, "knobs", message="compiling… 12 s")])
        app.refresh_now()
        await pilot.pause()
        assert message(app).startswith("compiling… 12 s — applying knobs compile=default")
        assert "compiling… 12 s" in shown(app, "#header")
        app.ingest(
            [Event(11.0, EventKind.CHANGED, "knobs", "none", "compile=default", details={"knobs": "compile=default"})]
        )
        app.refresh_now()
        await pilot.pause()
        header = shown(app, "#header")
        assert "compiling" not in header and "running" in header and "knobs: compile=default" in header


async def test_at_40x12_the_knobs_panel_scrolls_and_its_apply_button_is_on_screen() -> None:
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
