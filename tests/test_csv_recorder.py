"""``CsvRecorder``, the writer behind ``gpudash --record``, in-process: NVML's figures and the joules
joined to each sample, long times and energy kept to the millisecond and millijoule, whole lines when
the disk fills mid-run, a stream, and each row handed at once to a reader of a pipe (``--record``
through the real CLI: tests/test_record.py)."""

from __future__ import annotations

import errno
import io
import json
import os
from pathlib import Path

import pandas as pd
import pytest

from gpudash.core.protocol import Event, EventKind, GpuSample, RunConfig, Sample
from gpudash.core.running import Running
from gpudash.core.start_note import StartNote
from gpudash.recording import csvformat
from gpudash.recording.line_writers import RecordWriteError
from gpudash.recording.metadata import meta_path_for, run_metadata
from gpudash.recording.record import CsvRecorder
from tests.test_record import COLUMNS, assert_intact

# -- CsvRecorder, in-process ---------------------------------------------------------------------------------


def sample(t: float, steps: int, **kw: object) -> Sample:
    base = dict(
        time_s=t,
        workload="encdec",
        variant="serial",
        batch_size=8,
        steps=steps,
        samples=steps * 8,
        interval_s=0.25,
        steps_per_s=100.0,
        samples_per_s=800.0,
        step_ms_p50=10.0,
        step_ms_p95=12.0,
        syncs_per_step=0.0,
        loss=2.3,
    )
    base.update(kw)
    return Sample(**base)  # type: ignore[arg-type]


def test_recorder_rows_join_gpu_and_joules(tmp_path: Path) -> None:
    path = tmp_path / "r.csv"
    rec = CsvRecorder(path, run_metadata(RunConfig()))
    started = StartNote(torch="9.9")
    rec.on_message(
        Event(
            0.1,
            EventKind.STARTED,
            message="go",
            details=started.details(),
            running=Running("encdec", "serial", 8),
            data=started,
        )
    )
    rec.on_message(GpuSample(0.2, gpu_util_pct=50.0, energy_j=0.0, power_w=100.0, throttle=""))
    rec.on_message(sample(0.25, 10))
    rec.on_message(GpuSample(0.7, gpu_util_pct=90.0, energy_j=40.0, power_w=200.0, throttle="sw_power_cap"))
    rec.on_message(sample(0.75, 30))
    rec.on_message(sample(1.0, 50))  # same NVML tick: repeats the estimate
    rec.on_message(
        Event(
            1.1, EventKind.CHANGED, what="batch_size", before="8", after="16", running=Running("encdec", "serial", 16)
        )
    )
    rec.close()
    df = pd.read_csv(path)
    s = df[df.row_kind == "sample"]
    assert list(s.gpu_util_pct) == [50.0, 90.0, 90.0]
    assert pd.isna(s.joules_per_step.iloc[0])
    assert s.joules_per_step.iloc[1] == pytest.approx(40.0 / 20) and s.joules_per_step.iloc[2] == pytest.approx(2.0)
    assert s.throttle.fillna("").tolist() == ["", "sw_power_cap", "sw_power_cap"]
    ev = df[df.row_kind == "event"]
    changed = ev[ev.event_kind == "changed"].iloc[0]
    assert changed.batch_size == 16  # event rows show what runs after the event
    summary = df[df.row_kind == "summary"]
    assert len(summary) == 1 and summary.batch_size.iloc[0] == 8  # the batch-8 stretch, ended by the change
    assert list(df[df.row_kind != "sample"].event_kind) == ["started", "summary", "changed"]
    meta = json.loads(meta_path_for(path).read_text())
    assert meta["torch_version"] == "9.9" and meta["rows"] == 6  # data rows, not the header


def test_recorder_keeps_long_times_and_energy_to_the_millisecond_and_millijoule(tmp_path: Path) -> None:
    path = tmp_path / "long.csv"
    rec = CsvRecorder(path, {})
    rec.on_message(GpuSample(86400.1234, energy_j=31_536_000.0126, power_w=365.0))
    rec.on_message(sample(86400.2345, 10))
    rec.close()
    s = pd.read_csv(path).iloc[0]
    assert s.time_s == pytest.approx(86400.235, abs=1e-9)
    assert s.energy_j == pytest.approx(31_536_000.013, abs=1e-6)


def test_recorder_full_disk_mid_run_leaves_whole_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "f.csv"
    rec = CsvRecorder(path, {})
    rec.on_message(sample(0.25, 10))
    import gpudash.recording.line_writers as line_writers

    real_write = os.write
    calls = {"n": 0}

    def failing_write(fd: int, data: bytes) -> int:
        calls["n"] += 1
        if calls["n"] == 1:
            return real_write(fd, bytes(data[: len(data) // 2]))  # half a line gets out...
        raise OSError(errno.ENOSPC, "No space left on device")  # ...then the disk is full

    monkeypatch.setattr(line_writers.os, "write", failing_write)
    with pytest.raises(RecordWriteError, match="No space left"):
        rec.on_message(sample(0.5, 20))
    monkeypatch.setattr(line_writers.os, "write", real_write)
    rec.close()
    rows = assert_intact(path)
    assert len(rows) == 2  # the header and the first row; the torn row was cut back


def test_recorder_to_a_stream() -> None:
    buf = io.StringIO()
    rec = CsvRecorder(buf, {})
    rec.on_message(sample(0.25, 10))
    rec.close()
    assert rec.meta_path is None
    assert buf.getvalue().splitlines()[0] == ",".join(COLUMNS)
    df = pd.read_csv(io.StringIO(buf.getvalue()))
    assert df[df.row_kind == "sample"].steps.tolist() == [10]
    assert df.row_kind.tolist() == ["sample", "summary"]  # the run's one configuration, at the end


def test_record_to_a_pipe_hands_each_row_to_the_reader_as_it_is_written() -> None:
    """``gpudash record - | reader``: stdout to a pipe is block-buffered (8 KiB), so a row that is
    not flushed waits there for dozens more. Each row, and the header first, must be readable from
    the pipe at once: a real pipe and a text stream buffered as stdout is."""
    r, w = os.pipe()
    os.set_blocking(r, False)
    stream = open(w, "w", encoding="utf-8", buffering=8192)  # closed below
    try:
        rec = CsvRecorder(stream)

        def in_pipe() -> list[str]:
            try:
                return os.read(r, 1 << 16).decode().splitlines()
            except BlockingIOError:
                return []

        assert in_pipe() == [",".join(csvformat.header())]
        rec.on_message(Sample(1.0, "encdec", "serial", 8, 10, 80, 0.25, 40.0, 320.0, 25.0, 26.0, 0.0))
        (row,) = in_pipe()
        assert row.startswith("sample,1.000,encdec,serial,8,10,80,")
        rec.close()
    finally:
        stream.close()
        os.close(r)
