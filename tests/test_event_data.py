"""Every event a recording keeps comes back whole: its kind, what, before, after, message, its
details, its configuration (``Running``) and its typed data (a diagnosis' judgement, with its
evidence, sync table, remedies and compile verdict; a job's settings; its goodput; a memory
window's peak; a compile's note; a FLOPs count; a job's memory; a profiler window's figures;
run.json's facts; a phase's seconds; a stall's report) through a real CSV file, as a replay reads
it (a property test); and a cell that is not an event's data is a malformed row, never a wrong
verdict."""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpudash.core.compile_note import CompileNote
from gpudash.core.compile_table import COMPILE_WHATS
from gpudash.core.events import SHAPES
from gpudash.core.flops_note import FlopsNote
from gpudash.core.goodput import Goodput, PhaseSpan, StallReport
from gpudash.core.memory_note import MemoryNote
from gpudash.core.protocol import (
    DIAGNOSIS,
    FLOPS,
    GOODPUT,
    MEMORY,
    MEMORY_PEAK,
    OUT_OF_MEMORY,
    PROCESSES,
    TRACE,
    WORLD,
    Event,
    EventKind,
)
from gpudash.core.run_facts import RunFacts
from gpudash.core.running import Running
from gpudash.core.stage_times import StageTimes
from gpudash.core.start_note import StartNote
from gpudash.core.trace_note import TraceNote
from gpudash.core.world_event import WorldFacts
from gpudash.diagnosis.evidence import Evidence
from gpudash.diagnosis.judge import Findings, Judgement, WorldView, judge
from gpudash.diagnosis.memory_peak import MemoryPeak, PeakAnswer, PeakHolder
from gpudash.diagnosis.verdict import Bound, Diagnosis
from gpudash.recording import csvformat
from gpudash.recording.csvformat import RowParser
from gpudash.recording.older_events import OLDER_DATA

# any printable text a script's path or line holds (a replay strips control characters: a hostile file's)
text = st.text(st.characters(blacklist_categories=("Cs", "Cc")), max_size=40)
finite = st.floats(min_value=-1e12, max_value=1e12, allow_nan=False, allow_infinity=False)
maybe = st.none() | finite
settings_values = st.dictionaries(text, text, min_size=1, max_size=6)  # a job's settings: text keys and values


@st.composite
def evidences(draw: Any) -> Evidence:
    return Evidence(
        steps=draw(st.integers(1, 10_000)),
        step_ms=draw(st.floats(0.001, 1e6)),
        input_ms=draw(st.floats(0.0, 1e6)),
        syncs_per_step=draw(maybe),
        gpu_busy_pct=draw(st.none() | st.floats(0.0, 100.0)),
        gpu_ms_per_step=draw(maybe),
        host_ms_per_step=draw(maybe),
        launch_delay_us=draw(maybe),
        throttled=draw(st.none() | text),
        sm_active_pct=draw(maybe),
        dtype=draw(st.none() | st.sampled_from(["bf16", "fp16", "fp32"])),
        comm_exposed_kinds=draw(st.none() | st.dictionaries(text, finite, min_size=1, max_size=4)),
        comm_last_rank=draw(st.none() | st.integers(0, 64)),
        straggler_rank=draw(st.none() | st.integers(0, 64)),
        job_settings=draw(st.none() | settings_values),
        input_workers=draw(st.none() | st.integers(0, 64)),
        cpus=draw(st.none() | st.integers(1, 256)),
    )


@st.composite
def judgements(draw: Any) -> Judgement:
    compile_ = draw(st.none() | st.builds(Diagnosis, st.just(Bound.COMPILE), text, text))
    findings = Findings(
        draw(evidences()),
        script=draw(st.booleans()),
        window_start_s=draw(st.none() | st.floats(0.0, 1e6)),
        compile=compile_,
        compile_figures=draw(st.dictionaries(st.sampled_from(["compile_recompiles", "compile_lost_s"]), text)),
        note=draw(text),
        beside=tuple(draw(st.lists(text, max_size=3))),
        heavy=draw(text),
        over=draw(text),
        straggler=draw(text),
        straggler_rank=draw(st.none() | st.integers(0, 63)),
        world=draw(
            st.none()
            | st.builds(WorldView, st.integers(2, 64), st.integers(0, 63), st.none() | st.integers(0, 63), maybe, maybe)
        ),
    )
    return judge(findings)  # the rules' verdict and remedies, whatever the figures


worlds = st.builds(
    WorldFacts,
    text,
    st.none() | st.floats(0.0, 4e9).map(lambda x: round(x, 3)),
    text,
    text,
    st.lists(st.integers(0, 1023), max_size=8).map(tuple),
    st.integers(0, 1024),
    st.lists(st.tuples(st.integers(0, 1023), st.integers(0, 63)), max_size=8).map(tuple),
)


stage_times = st.builds(StageTimes, text, st.floats(0.0, 1e6), text, st.floats(0.0, 1e6))
whole = st.none() | st.integers(0, 1 << 31)
starts = st.builds(  # a family's start (image size, workers), a job's (optimizer, steps, command, settings), a track's
    StartNote,
    text,
    text,
    whole,
    st.none() | text,
    st.none() | text,
    whole,
    whole,
    whole,
    st.none() | text,
    st.none() | text,
    st.none() | text,
    st.just({}) | settings_values,
)
goodputs = st.builds(
    Goodput,
    st.dictionaries(text, st.floats(0.0, 1e6), max_size=8),
    st.floats(0.0, 1e6),
    st.none() | st.floats(0.0, 100.0),
)


holders = st.builds(
    PeakHolder,
    st.integers(0, 1 << 40),
    st.sampled_from(["forward", "backward", "optimizer", "before"]),
    st.none(),
    st.integers(0, 1 << 20),
    text,
)
peaks = st.builds(
    PeakAnswer,
    st.builds(
        MemoryPeak,
        *[st.integers(0, 1 << 40)] * 3,
        st.lists(holders, max_size=4),
        st.integers(0, 1 << 40),
        st.integers(0, 1 << 20),
        st.booleans(),
    ),
    st.lists(text, max_size=4).map(tuple),
    text,
)
small = st.integers(0, 1 << 30)
notes = st.builds(CompileNote, text, text, small, small, st.floats(0.0, 1e6), text, text, text, text, text, text, small)
wholes = st.none() | st.integers(0, 1 << 62)
numbers = st.none() | st.floats(0.0, 1e9)
flops_notes = st.builds(FlopsNote, wholes, text, numbers, text, text, wholes, numbers, numbers)
names = st.sampled_from(["params", "grads", "optimizer", "activations", "peak", "total", "rss"])
memory_notes = st.builds(
    MemoryNote,
    st.dictionaries(names, small, max_size=4),
    st.dictionaries(names, small, max_size=4),
    small,
    small,
    st.integers(1, 64),
    st.none() | small,
    text,
    st.lists(st.tuples(text, small), max_size=3).map(tuple),
)
figure_names = st.sampled_from(["gpu_busy_pct", "idle_pct", "comm_busbw_gbps", "stream_7_busy_pct"])
trace_notes = st.builds(
    TraceNote,
    text,
    small,
    st.floats(0.0, 1e6),
    st.none() | st.floats(0.0, 1e6),
    st.dictionaries(figure_names, st.floats(0.0, 1e6), max_size=4),
    st.lists(st.tuples(text, st.floats(0.0, 1e3)), max_size=3).map(tuple),
    text,
)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(1 << 40), 1 << 40) | st.floats(-1e9, 1e9) | text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=8,
)
run_facts = st.builds(RunFacts, st.dictionaries(text, json_values, max_size=4))
runnings = st.builds(Running, text.filter(bool), text, st.integers(0, 1 << 20), text, text, st.integers(1, 1 << 16))
# each typed data's event, as its makers name it (a compile note: any of the compile events)
WHAT = {
    Judgement: st.just(DIAGNOSIS),
    WorldFacts: st.just(WORLD),
    StageTimes: st.just(StageTimes.KIND),
    Goodput: st.just(GOODPUT),
    PeakAnswer: st.just(MEMORY_PEAK),
    FlopsNote: st.just(FLOPS),
    MemoryNote: st.just(MEMORY),
    TraceNote: st.just(TRACE),
    RunFacts: st.sampled_from([SHAPES, PROCESSES, OUT_OF_MEMORY]),
    CompileNote: st.sampled_from(sorted(COMPILE_WHATS)),
}
# an event without data may be of a kind an older recording named in words: it reads back without data
no_data_what = st.sampled_from(sorted(OLDER_DATA)) | text


@st.composite
def events(draw: Any) -> Event:
    kind = draw(st.sampled_from(list(EventKind)))
    details = draw(st.dictionaries(text.filter(lambda k: k != ""), text, max_size=6))
    data: Any = None
    if kind == EventKind.MEASURED:
        payloads = judgements() | worlds | stage_times | goodputs | peaks | notes | flops_notes | memory_notes
        data = draw(st.none() | payloads | trace_notes | run_facts)
    elif kind == EventKind.STARTED:
        data = draw(st.none() | starts)  # what the run said of itself at its start
    elif kind == EventKind.STALLED:
        data = draw(st.none() | st.builds(StallReport, st.floats(0.0, 1e6), st.lists(text, max_size=4).map(tuple)))
    elif kind == EventKind.PHASE:
        data = draw(st.none() | st.builds(PhaseSpan, st.none() | st.floats(0.0, 1e6)))  # under way, or its seconds
    what = draw(WHAT.get(type(data), text) if data is not None else no_data_what)
    return Event(
        round(draw(st.floats(0.0, 1e6)), 3),  # the CSV keeps a row's time to the millisecond
        kind,
        what=what,
        before=draw(text),
        after=draw(text),
        message=draw(text),
        details=details,
        data=data,
        running=draw(st.none() | runnings),
    )


def written_and_read(event: Event) -> Event:
    """``event`` through a CSV file's text as the recorder writes it and a replay reads it."""
    written = csvformat.format_row(csvformat.header()) + csvformat.format_row(csvformat.event_row(event))
    header, row = list(csv.reader(io.StringIO(written, newline="")))
    (back,) = RowParser(header).messages(row)
    assert isinstance(back, Event)
    return back


@settings(max_examples=150, deadline=None)
@given(events())
def test_every_event_comes_back_whole_from_a_recording(event: Event) -> None:
    back = written_and_read(event)
    assert back == event  # kind, what, before, after, message, time
    assert back.details == event.details
    assert back.running == event.running
    assert back.data == event.data
    if isinstance(event.data, Judgement):
        assert isinstance(back.data, Judgement) and back.data.line() == event.data.line()


@pytest.mark.parametrize(
    "cell",
    [
        "{",  # not JSON
        "[1, 2]",  # not an object
        '{"details": {"a": 1}}',  # a detail that is not text
        '{"data": {"kind": "nothing we know"}}',
        '{"running": {"workload": "encdec", "batch_size": "8"}}',  # a batch size that is not a number
        '{"running": {"variant": "serial"}}',  # a configuration of no workload
        '{"data": {"kind": "compile", "line": "12"}}',  # a compile's line that is not a number
        '{"data": {"kind": "compile", "guard": "x"}}',  # a field no compile note has
        '{"data": {"kind": "flops", "flops_per_step": 1.5, "dtype": "", "peak_tflops": null, "peak_source": ""}}',
        '{"data": {"kind": "judgement", "findings": {}}}',  # a judgement without its evidence
        "[" * 5000 + "]" * 5000,  # deep enough to exhaust a recursive reader
    ],
)
def test_an_event_data_cell_that_is_not_an_events_is_a_malformed_row(cell: str) -> None:
    header = csvformat.header()
    row = csvformat.event_row(Event(1.0, EventKind.MEASURED, what=DIAGNOSIS, message="input-bound: …"))
    row[header.index(csvformat.EVENT_DATA_COLUMN)] = cell
    with pytest.raises(ValueError):
        RowParser(header).messages(row)


def test_a_recording_from_before_the_column_reads_its_events_without_details() -> None:
    header = csvformat.header()
    row = csvformat.event_row(Event(1.0, EventKind.CHANGED, what="batch_size", before="8", after="16"))
    at = header.index(csvformat.EVENT_DATA_COLUMN)
    (back,) = RowParser(header[:at] + header[at + 1 :]).messages(row[:at] + row[at + 1 :])
    assert back == Event(1.0, EventKind.CHANGED, what="batch_size", before="8", after="16")
    assert isinstance(back, Event) and back.details == {} and back.data is None
