"""A recording made by an earlier gpudash still replays and reports: ``tests/data/recordings/before-gpm.csv``
was written by the version before the GPM and model-FLOPs columns (``gpudash record -w encdec -b 8
--steps 300 --gpus 0,1`` on the CPU, NVML faked with two GPUs), and is kept as it came."""

from __future__ import annotations

from pathlib import Path

from gpudash.cli.main import main
from gpudash.core.compile_table import RECOMPILE, CompileTable
from gpudash.core.flops_note import FlopsNote
from gpudash.core.goodput import PhaseSpan, StallReport
from gpudash.core.memory_note import MemoryNote
from gpudash.core.protocol import (
    FLOPS,
    MEMORY,
    PROCESSES,
    TRACE,
    Event,
    EventKind,
    ExitCode,
    GpuSample,
    Message,
    Sample,
)
from gpudash.core.run_facts import RunFacts
from gpudash.core.running import Running
from gpudash.core.start_note import StartNote
from gpudash.core.trace_note import TraceNote
from gpudash.recording import csvformat
from gpudash.recording.csvformat import RowParser
from gpudash.recording.csvread import open_csv
from gpudash.recording.older_events import older_data
from gpudash.recording.replay import RecordingReader
from tests import printed

OLD = Path(__file__).parent / "data" / "recordings" / "before-gpm.csv"


def _messages(path: Path) -> tuple[RecordingReader, list[Message]]:
    with open_csv(path) as f:
        reader = RecordingReader(f, path.name)
        messages = [*reader.read(), *reader.finish()]
    return reader, messages


def test_the_old_file_lacks_the_new_columns_it_is_read_against() -> None:
    header = OLD.read_text().splitlines()[0].split(",")
    assert not set(header) & {*csvformat.GPM_COLUMNS, *csvformat.MODEL_COLUMNS, "gpu0_sm_active_pct"}
    assert "gpu1_temp_c" in header  # per-GPU columns of its own day


def test_an_old_recording_replays_every_row_with_its_per_gpu_readings_and_no_gpm_figures() -> None:
    reader, messages = _messages(OLD)
    assert reader.bad_rows == 0
    samples = [m for m in messages if isinstance(m, Sample)]
    ticks = [m for m in messages if isinstance(m, GpuSample)]
    assert len(samples) == 10 and len(ticks) == 10
    assert samples[-1].steps == 300 and samples[-1].mfu_pct is None and samples[-1].flops_per_step is None
    tick = ticks[-1]
    assert tick.gpu_util_pct == 10.0 and tick.sm_active_pct is None and tick.tensor_active_pct is None
    assert [(r.index, r.gpu_util_pct, r.sm_active_pct) for r in tick.per_gpu] == [(0, 10.0, None), (1, 11.0, None)]


def test_an_old_recording_reports_as_before(tmp_path: Path) -> None:
    out = tmp_path / "report"
    assert main(["report", str(OLD), "--out", str(out), "-q"]) == ExitCode.OK
    md = (out / "report.md").read_text()
    (row,) = printed.table_rows(md, "## Run 1:")  # its one configuration, its steps/s
    assert row[1] == "encdec/serial bs8" and printed.figure(row[3]) == printed.Figure(124.0), row


def test_a_new_recordings_columns_keep_the_old_ones_in_their_places() -> None:
    old = OLD.read_text().splitlines()[0].split(",")  # two GPUs watched, 0 and 1
    new = csvformat.header((0, 1))
    assert new[: len(old)] == old  # every earlier column where it was, the per-GPU ones too
    assert new[len(old) :] == [
        *csvformat.GPM_COLUMNS,
        *csvformat.MODEL_COLUMNS,
        *("gpu0_sm_active_pct", "gpu0_tensor_active_pct", "gpu0_dram_active_pct"),
        *("gpu1_sm_active_pct", "gpu1_tensor_active_pct", "gpu1_dram_active_pct"),
        *csvformat.TRAINING_COLUMNS,  # a job's training seconds
        *csvformat.WORLD_COLUMNS,  # a rank row's own
        *csvformat.MEMORY_COLUMNS,  # a job's memory by kind
        csvformat.EVENT_DATA_COLUMN,  # an event's details and typed data, last
    ]


def test_an_older_recordings_configuration_and_compile_details_read_back_as_their_objects() -> None:
    """Before their objects, the configuration, a compile event's facts and a FLOPs count were the
    details' text: read as that version of the format, they build the run's state, compile table,
    MFU's reason and memory as a new one does."""
    header = csvformat.header()
    cells = {
        "started": '{"details":{"workload":"job:train.py","variant":"","batch_size":"64","device":"cuda:0"}}',
        "recompile": (
            '{"details":{"id":"0/1","fn":"forward","file":"/w/train.py","line":"41","step":"12","seconds":"0.750",'
            '"reason":"dim 1 of idx: 128 → 256","cause":"dim 1 of idx","kind":"shape","fix":"pad","count":"1"}}'
        ),
    }
    events = []
    for kind, what in ((EventKind.STARTED, ""), (EventKind.MEASURED, RECOMPILE)):
        row = csvformat.event_row(Event(1.0, kind, what=what))
        row[header.index(csvformat.EVENT_DATA_COLUMN)] = cells[what or "started"]
        (event,) = RowParser(header).messages(row)
        assert isinstance(event, Event)
        events.append(event)
    assert events[0].running == Running("job:train.py", "", 64, device="cuda:0")
    # a job's started event of the version before its start was typed: its settings alone, as its data
    row = csvformat.event_row(Event(1.0, EventKind.STARTED))
    settings_alone = '{"running":null,"data":{"kind":"job_settings","values":{"a":"1"}}}'
    row[header.index(csvformat.EVENT_DATA_COLUMN)] = settings_alone
    (started,) = RowParser(header).messages(row)
    assert isinstance(started, Event) and started.data == StartNote(settings={"a": "1"})
    table = CompileTable()
    assert table.on_event(events[1])
    (fn,) = table.functions.values()
    assert (fn.name, fn.line, fn.compiles, fn.reasons) == ("forward", 41, 1, {"dim 1 of idx": 1})
    assert table.recompiles[0].step == 12 and table.recompiles[0].seconds == 0.75
    blank = "model FLOPs: 100 FLOP a step (bf16 60%, fp32 40%); MFU blank: the step mixes dtypes"
    flops = older_data({"what": FLOPS, "message": blank}, {"flops_per_step": "100", "dtype": "mixed"})
    assert flops == FlopsNote(100, "mixed", None, "", "the step mixes dtypes")
    held = {"params_bytes": "8", "peak_allocated_bytes": "64", "total_bytes": "80", "step": "4", "fits_batch": "12"}
    memory = older_data({"what": MEMORY}, {**held, "activation_lines": '[["t.py:9 y = f(x)", 24]]'})
    assert older_data({"kind": "phase", "what": "evaluation", "after": "1.250"}, {}) == PhaseSpan(1.25)
    assert older_data({"kind": "phase", "what": "evaluation", "after": ""}, {}) == PhaseSpan(None)  # under way
    where = {"stalled_s": "31.000", "where": "rank 0 main: t.py:9 in wait\nrank 1 main: t.py:12"}
    assert older_data({"kind": "stalled", "what": "stalled"}, where) == StallReport(
        31.0, ("rank 0 main: t.py:9 in wait", "rank 1 main: t.py:12")
    )
    joined = {"processes": '[{"pid": 7, "steps": 20}]', "steps_combined": "one after the other"}
    assert older_data({"what": PROCESSES}, joined) == RunFacts(
        {"processes": [{"pid": 7, "steps": 20}], "steps_combined": "one after the other"}
    )
    window = {"trace_path": "/t/w.json.gz", "trace_steps": "20", "trace_wall_ms": "400", "gpu_busy_pct": "72.2"}
    trace = older_data({"what": TRACE, "message": "20 steps traced → /t/w.json.gz"}, {**window, "top1_kernel": "gemm"})
    assert trace == TraceNote("/t/w.json.gz", 20, 400.0, None, {"gpu_busy_pct": 72.2}, (("gemm", 0.0),))
    assert isinstance(memory, MemoryNote) and memory.run_json() == {
        **{k: int(v) for k, v in held.items()},
        "activation_lines": [["t.py:9 y = f(x)", 24]],
    }
