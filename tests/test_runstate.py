"""The one run state: what runs now, read once from each event and followed the same way by the
dashboard, the CSV recorder and a sweep."""

from __future__ import annotations

import csv
import io
import pickle
from dataclasses import replace
from typing import Any

from gpudash.core.protocol import Event, EventKind, RunConfig
from gpudash.core.running import Running
from gpudash.core.runstate import RunState
from gpudash.recording import event_data
from gpudash.recording.record import CsvRecorder
from gpudash.tui.state import DashState
from tests.messages import present
from tests.tui.fakes import run_segment

STARTED = Running("encdec", "serial", 8, "none", device="cuda:0")


def changed(t: float, what: str, before: str, after: str, **config: Any) -> Event:
    return Event(t, EventKind.CHANGED, what, before, after, running=replace(STARTED, **config))


def test_an_older_recordings_configuration_in_text_reads_back_typed_and_a_new_one_whole() -> None:
    older = '{"details":{"workload":"encdec","variant":"serial","batch_size":"8","device":"cuda:0","knobs":"none"}}'
    details, running, _ = event_data.decode(older, {})
    assert running == STARTED and details["batch_size"] == "8"
    # a hand-edited file: a batch size that is not a whole number reads as 0, never a crash
    assert present(event_data.decode(older.replace('"8"', '"eight"'), {})[1]).batch_size == 0
    e = Event(1.0, EventKind.STARTED, details={"torch": "9.9"}, running=replace(STARTED, world_size=4))
    details, running, _ = event_data.decode(event_data.encode(e), {})
    again = Event(1.0, EventKind.STARTED, details=details, running=running)
    assert again.running == e.running and again.details == e.details
    assert Event(1.0, EventKind.PAUSED).running is None


def test_a_typed_configuration_fills_the_text_the_csv_keeps_and_crosses_the_process_boundary() -> None:
    e = Event(1.0, EventKind.CHANGED, "batch_size", "8", "16", running=Running("encdec", "serial", 16, device="cpu"))
    assert e.details["batch_size"] == "16" and e.details["workload"] == "encdec"
    again = pickle.loads(pickle.dumps(e))
    assert again.running == e.running and again.details == e.details


def test_the_segment_grows_only_when_another_configuration_runs() -> None:
    run = RunState()
    assert run.observe(Event(1.0, EventKind.STARTED, running=STARTED)) and run.segment == 1
    assert not run.observe(Event(2.0, EventKind.PAUSED, running=STARTED))
    assert run.observe(changed(3.0, "batch_size", "8", "16", batch_size=16)) and run.segment == 2
    assert run.batch_size == 16 and run.device == "cuda:0"
    # a change answered with the configuration that already runs is no new stretch
    assert not run.observe(changed(4.0, "knobs", "none", "none", batch_size=16)) and run.segment == 2
    # a restart is a new stretch even of the same configuration
    assert run.observe(Event(5.0, EventKind.STARTED, running=replace(STARTED, batch_size=16))) and run.segment == 3


def test_a_change_from_an_older_file_without_details_still_says_what_runs() -> None:
    run = RunState()
    run.observe(Event(1.0, EventKind.STARTED, running=STARTED))
    for what, after, field, want in (
        ("variant", "pipelined", "variant", "pipelined"),
        ("batch_size", "32", "batch_size", 32),
        ("knobs", "amp=bf16", "knobs", "amp=bf16"),
    ):
        assert run.observe(Event(2.0, EventKind.CHANGED, what, "", after))
        assert getattr(run.running, field) == want
    assert run.device == "cuda:0"  # kept: a change never moves the run to another device


def test_the_dashboard_and_the_recording_agree_on_what_runs_after_every_event() -> None:
    messages = [
        Event(1.0, EventKind.STARTED, running=STARTED),
        *run_segment(1.0, 3.0, 100.0),
        changed(3.0, "variant", "serial", "pipelined", variant="pipelined"),
        *run_segment(3.0, 5.0, 120.0, variant="pipelined"),
        changed(5.0, "knobs", "none", "amp=bf16", variant="pipelined", knobs="amp=bf16"),
    ]
    dash = DashState(config=RunConfig(workload="encdec"))
    out = io.StringIO()
    recorder = CsvRecorder(out, {})
    for m in messages:
        dash.ingest(m)
        recorder.on_message(m)
    assert (dash.run.workload, dash.run.variant, dash.run.batch_size, dash.run.knobs) == (
        "encdec",
        "pipelined",
        8,
        "amp=bf16",
    )
    assert dash.run == recorder.run
    last_event = [r for r in csv.DictReader(io.StringIO(out.getvalue())) if r["row_kind"] == "event"][-1]
    assert (last_event["variant"], last_event["batch_size"], last_event["knobs"]) == ("pipelined", "8", "amp=bf16")


def test_before_any_event_the_dashboard_shows_what_the_settings_say() -> None:
    dash = DashState(config=RunConfig(workload="sync_loss", batch_size=4, device="cpu", knobs="tf32=on"))
    assert (dash.run.workload, dash.run.variant, dash.run.batch_size, dash.device, dash.run.knobs) == (
        "sync_loss",
        "sync-heavy",
        4,
        "cpu",
        "tf32=on",
    )
    assert dash.run.segment == 0  # nothing has run yet
