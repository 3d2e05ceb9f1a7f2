"""Pilot tests of the dashboard's recording (the c key, quitting mid-recording) and of a replay
shown read-only (fake source, no torch)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from gpudash.core.protocol import Event, EventKind
from gpudash.core.running import Running
from gpudash.core.start_note import StartNote
from gpudash.recording.replay import ReplaySource
from gpudash.tui.screens import KnobsScreen, PromptScreen
from tests.messages import present

from .conftest import palette_titles, replay_loaded
from .dashboard import (
    FIXTURE,
    SIZE,
    chart,
    cpu_app,
    make_app,
    message,
    prompt_error,
    prompt_input,
    running,
    running_app,
    shown,
)
from .fakes import NO_GPU, FakeSource, run_segment
from .test_replay import write_with_malformed_rows


async def test_recording_writes_the_record_format(tmp_path: Path) -> None:
    src = FakeSource()
    # what EngineSession keeps of the child's "started" event: a recording started mid-run
    # (after that event went by) must still carry it in its JSON
    note = StartNote(torch="2.5.1", cuda="12.4", device_name="NVIDIA H100 80GB HBM3")
    src.started_event = Event(
        0.0, EventKind.STARTED, running=Running("encdec", "serial", 8, device="cuda:0"), data=note
    )
    app = make_app(src)
    out = tmp_path / "rec.csv"
    async with app.run_test(size=SIZE) as pilot:
        await running_app(pilot, app, src)
        await pilot.press("c")
        assert isinstance(app.screen, PromptScreen)
        assert prompt_input(app).value.startswith("gpudash-encdec-")
        prompt_input(app).value = str(out)
        await pilot.press("enter")
        assert app.controller.recording.path == str(out)
        assert "● REC" in shown(app, "#header")
        src.push(
            *run_segment(10.0, 12.0, 200.0, steps0=2000),
            Event(12.0, EventKind.CHANGED, "batch_size", "8", "16"),
            *run_segment(12.0, 13.0, 120.0, batch=16, steps0=2400),
        )
        app.refresh_now()
        await pilot.press("c")
        assert app.controller.recording.recorder is None
        assert "saved" in message(app)
        assert "● REC" not in shown(app, "#header")
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


async def test_recording_to_a_bad_path_says_so(tmp_path: Path) -> None:
    async with running() as (pilot, app, src):
        await pilot.press("c")
        prompt_input(app).value = str(tmp_path / "nope" / "x.csv")
        await pilot.press("enter")
        assert "does not exist" in prompt_error(app)
        await pilot.press("escape")
        assert app.controller.recording.recorder is None


async def test_quit_stops_the_source_and_closes_the_recording(tmp_path: Path) -> None:
    async with running() as (pilot, app, src):
        app.start_recording(str(tmp_path / "q.csv"))
        src.push(*run_segment(10.0, 12.0, 200.0, steps0=2000))  # 8 samples, 4 GPU ticks
        app.refresh_now()
        await pilot.press("q")
        await pilot.pause()
    assert src.stopped >= 1
    assert app.controller.recording.recorder is None
    assert app.return_value == 0
    rows = list(csv.DictReader((tmp_path / "q.csv").open()))
    samples = [r for r in rows if r["row_kind"] == "sample"]
    assert len(samples) == 8  # every sample pushed before quitting made it to the file
    assert [float(r["time_s"]) for r in samples] == [10.25 + 0.25 * i for i in range(8)]
    assert all(float(r["steps_per_s"]) == 200.0 and int(r["batch_size"]) == 8 for r in samples)
    assert [int(r["steps"]) for r in samples] == [2000 + 50 * (i + 1) for i in range(8)]
    # the GPU ticks were joined in from the first tick the recording saw (after the 10.5 s sample)
    assert all(r["power_w"] != "" for r in samples[2:])
    meta = json.loads((tmp_path / "q.json").read_text())
    assert meta["end_time"]  # close() ran on quit: the recording is marked finished
    assert meta["rows"] >= len(rows)


async def test_a_knob_change_reaches_the_recording(tmp_path: Path) -> None:
    src = FakeSource(gpu_info=NO_GPU)
    app = make_app(src)
    out = tmp_path / "knobs.csv"
    async with app.run_test(size=SIZE) as pilot:
        await cpu_app(pilot, app, src)
        app.start_recording(str(out))
        app.set_knob("channels_last", "on")
        src.push(
            Event(5.0, EventKind.CHANGED, "knobs", "none", "channels_last=on", details={"knobs": "channels_last=on"}),
            *run_segment(5.0, 6.0, 20.0, syncs=None, steps0=100, knobs="channels_last=on"),
        )
        app.refresh_now()
        await pilot.press("c")
    rows = list(csv.DictReader(out.open()))
    change = [r for r in rows if r["row_kind"] == "event"][0]
    assert (change["event_what"], change["event_after"]) == ("knobs", "channels_last=on")
    assert [r["knobs"] for r in rows if r["row_kind"] == "sample"] == ["channels_last=on"] * 4
    assert json.loads(out.with_suffix(".json").read_text())["running_at_start"]["knobs"] == "none"


async def test_replay_shows_markers_and_stats_read_only() -> None:
    src = ReplaySource(FIXTURE)
    app = make_app(src)
    assert app.replay
    async with app.run_test(size=SIZE) as pilot:
        await replay_loaded(pilot, app)
        app.refresh_now()
        await pilot.pause()
        labels = [label for _, label in chart(app, "throughput").marker_labels]
        assert labels == ["serial→pipelined", "batch 8→16", "pipelined→serial"]
        assert present(app.state.current).key == ("encdec", "serial", 16, "none")
        assert present(app.state.previous).key == ("encdec", "pipelined", 16, "none")
        assert "replay" in app.status_text()
        assert app.check_action("batch_double", ()) is False
        await pilot.press("plus", "p", "c")
        assert app.controller.recording.recorder is None and app.state.run.batch_size == 16
        assert not any("Batch" in t or "pipelining" in t or t.startswith("Knob") for t in palette_titles(app))
        assert "knobs: none" in shown(app, "#header")  # shown, not settable
        await pilot.press("k")
        assert not isinstance(app.screen, KnobsScreen)
        assert "H100" in shown(app, "#header")


async def test_replay_says_how_many_malformed_rows_it_skipped(tmp_path: Path) -> None:
    p = tmp_path / "bad.csv"
    write_with_malformed_rows(p)
    app = make_app(ReplaySource(p))
    async with app.run_test(size=SIZE) as pilot:
        await replay_loaded(pilot, app)
        app.refresh_now()
        await pilot.pause()
        assert message(app) == "replay: 2 malformed rows skipped"
        assert app.state.last_sample is not None and app.state.last_sample.time_s == 1.5
