"""ReplaySource: a recorded CSV as an EngineSource (whole file, or tailing one being written)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gpudash.csvformat import event_row, format_row, header, sample_row
from gpudash.protocol import Event, GpuSample, SetBatchSize
from gpudash.replay import ReadOnlyError, ReplaySource

from .fakes import gpu, sample

FIXTURE = Path(__file__).parent / "data" / "replay.csv"


def test_reads_the_whole_recording_with_its_metadata():
    src = ReplaySource(FIXTURE)
    src.start()
    msgs = src.poll()
    assert src.poll() == []
    events = [m for m in msgs if isinstance(m, Event)]
    assert [e.kind for e in events] == ["starting", "started", "changed", "changed", "changed"]
    assert any(isinstance(m, GpuSample) for m in msgs)
    assert src.gpu_info.available and src.gpu_info.name.startswith("NVIDIA H100")
    assert src.gpu_info.driver == "550.54.15"
    assert src.config.device == "cuda:0"
    assert not src.alive
    with pytest.raises(ReadOnlyError):
        src.send(SetBatchSize(2))
    src.stop()


def test_without_metadata_the_gpu_info_says_why(tmp_path):
    p = tmp_path / "bare.csv"
    shutil.copy(FIXTURE, p)
    src = ReplaySource(p)
    src.start()
    assert not src.gpu_info.available and "no metadata" in src.gpu_info.unavailable
    assert len(src.poll()) > 100


def test_follow_waits_for_a_partial_last_line(tmp_path):
    p = tmp_path / "live.csv"
    rows = [format_row(header()),
            format_row(event_row(Event(0.5, "changed", "batch_size", "4", "8", 'a "quoted", message'))),
            format_row(sample_row(sample(1.0, 100.0), gpu(1.0))),
            format_row(sample_row(sample(1.25, 101.0), None))]
    with p.open("w") as f:
        f.write(rows[0] + rows[1][:10])  # half an event row
        f.flush()
        src = ReplaySource(p, follow=True)
        src.start()
        assert src.poll() == []
        f.write(rows[1][10:] + rows[2][:-1])  # the event row completes; the sample has no newline yet
        f.flush()
        got = src.poll()
        assert len(got) == 1 and got[0].message == 'a "quoted", message'
        f.write("\n" + rows[3])
        f.flush()
        got = src.poll()
        assert [type(m).__name__ for m in got] == ["GpuSample", "Sample", "Sample"]  # NVML first, as recorded
        assert got[2].steps_per_s == 101.0
    assert src.alive  # following: still listening
    assert src.poll() == []
    src.stop()
    assert not src.alive


def test_a_newline_inside_a_quoted_cell_waits_for_the_record(tmp_path):
    p = tmp_path / "q.csv"
    row = format_row(event_row(Event(1.0, "error", message="line one\nline two")))
    p.write_text(format_row(header()) + row[: row.index("\n") + 1])
    src = ReplaySource(p, follow=True)
    src.start()
    assert src.poll() == []
    with p.open("a") as f:
        f.write(row[row.index("\n") + 1 :])
    (e,) = src.poll()
    assert e.message == "line one\nline two"


def write_with_malformed_rows(p: Path) -> None:
    """Two good samples around two bad rows: one cut short, one with a non-number."""
    good = [format_row(sample_row(sample(t, 100.0), None)) for t in (1.0, 1.25, 1.5)]
    bad_value = good[1].replace(",100,", ",abc,", 1)  # steps_per_s
    assert bad_value != good[1]
    p.write_text(format_row(header()) + good[0] + "sample,1.1,encdec\n" + bad_value + good[2])


def test_malformed_rows_are_skipped_and_counted(tmp_path):
    p = tmp_path / "bad.csv"
    write_with_malformed_rows(p)
    src = ReplaySource(p)
    src.start()
    got = src.poll()
    assert [m.time_s for m in got] == [1.0, 1.5]
    assert src.bad_rows == 2 and src.rows_read == 2
