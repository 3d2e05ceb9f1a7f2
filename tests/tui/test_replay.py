"""ReplaySource: a recorded CSV as an EngineSource (whole file, or tailing one being written),
read by a thread and handed out in bounded polls; RecordingReader, the parsing it runs."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from gpudash.core.protocol import Event, EventKind, GpuSample, SetBatchSize
from gpudash.recording.csvformat import event_row, format_row, header, sample_row
from gpudash.recording.replay import POLL_MAX_MESSAGES, ReadOnlyError, RecordingReader, ReplaySource, read_all
from tests.messages import events_of, present, samples_of

from .fakes import gpu, sample

FIXTURE = Path(__file__).parent / "data" / "replay.csv"


def poll_until(src: ReplaySource, n: int, timeout_s: float = 30.0) -> list:
    """Poll (as the dashboard's timer does) until ``n`` messages came."""
    out: list = []
    deadline = time.monotonic() + timeout_s
    while len(out) < n:
        assert time.monotonic() < deadline, f"only {len(out)} of {n} messages after {timeout_s} s"
        out += src.poll()
        time.sleep(0.01)
    return out


def test_reads_the_whole_recording_with_its_metadata():
    src = ReplaySource(FIXTURE)
    msgs = read_all(src)
    assert src.poll() == []
    events = [m for m in msgs if isinstance(m, Event)]
    assert [e.kind for e in events] == ["starting", "started", "changed", "changed", "changed"]
    assert any(isinstance(m, GpuSample) for m in msgs)
    assert src.gpu_info.available and present(src.gpu_info.name).startswith("NVIDIA H100")
    assert src.gpu_info.driver == "550.54.15"
    assert src.config.device == "cuda:0"
    assert not src.alive and src.info.loading is None
    with pytest.raises(ReadOnlyError):
        src.send(SetBatchSize(2))


def test_without_metadata_the_gpu_info_says_why(tmp_path):
    p = tmp_path / "bare.csv"
    shutil.copy(FIXTURE, p)
    src = ReplaySource(p)
    msgs = read_all(src)
    assert not src.gpu_info.available and "no metadata" in present(src.gpu_info.unavailable)
    assert len(msgs) > 100
    assert src.info.notes == ()  # no file is not a bad file: nothing to warn about


def test_a_partial_last_line_waits_until_it_is_complete(tmp_path):
    p = tmp_path / "live.csv"
    rows = [
        format_row(header()),
        format_row(event_row(Event(0.5, EventKind.CHANGED, "batch_size", "4", "8", 'a "quoted", message'))),
        format_row(sample_row(sample(1.0, 100.0), gpu(1.0))),
        format_row(sample_row(sample(1.25, 101.0), None)),
    ]
    with p.open("w") as f, p.open(newline="") as r:
        rd = RecordingReader(r, "live.csv")
        f.write(rows[0] + rows[1][:10])  # half an event row
        f.flush()
        assert rd.read() == []
        f.write(rows[1][10:] + rows[2][:-1])  # the event row completes; the sample has no newline yet
        f.flush()
        got = rd.read()
        (changed,) = events_of(got)
        assert len(got) == 1 and changed.message == 'a "quoted", message'
        f.write("\n" + rows[3])
        f.flush()
        got = rd.read()
        assert [type(m).__name__ for m in got] == ["GpuSample", "Sample", "Sample"]  # NVML first, as recorded
        assert samples_of(got)[1].steps_per_s == 101.0


def test_a_newline_inside_a_quoted_cell_waits_for_the_record(tmp_path):
    p = tmp_path / "q.csv"
    row = format_row(event_row(Event(1.0, EventKind.ERROR, message="line one\nline two")))
    p.write_text(format_row(header()) + row[: row.index("\n") + 1])
    with p.open(newline="") as r:
        rd = RecordingReader(r, "q.csv")
        assert rd.read() == []
        with p.open("a") as f:
            f.write(row[row.index("\n") + 1 :])
        got = rd.read()
    (e,) = events_of(got)
    assert len(got) == 1 and e.message == "line one\nline two"


def test_follow_hands_out_rows_as_they_are_appended(tmp_path):
    p = tmp_path / "live.csv"
    p.write_text(format_row(header()))  # a recording just begun: its header, no rows yet
    src = ReplaySource(p, follow=True)
    src.start()
    try:
        with p.open("a") as f:
            f.write(format_row(sample_row(sample(1.0, 100.0), None)))
            f.flush()
            (first,) = poll_until(src, 1)
            f.write(format_row(sample_row(sample(1.25, 101.0), gpu(1.25))))
            f.flush()
            got = poll_until(src, 2)
        assert first.steps_per_s == 100.0 and [type(m).__name__ for m in got] == ["GpuSample", "Sample"]
        assert src.alive  # following: still listening
    finally:
        src.stop()
    assert not src.alive


def test_a_big_recording_comes_in_bounded_polls_with_its_progress(tmp_path):
    p = tmp_path / "big.csv"
    n = 3 * POLL_MAX_MESSAGES  # rows of one Sample each: at least three polls' worth
    p.write_text(
        format_row(header()) + "".join(format_row(sample_row(sample(1 + i / 4, 100.0), None)) for i in range(n))
    )
    src = ReplaySource(p)
    src.start()
    assert src.info.loading is not None and src.info.loading.startswith("reading")
    sizes, total = [], 0
    deadline = time.monotonic() + 60
    while src.alive and time.monotonic() < deadline:
        got = src.poll()
        sizes.append(len(got))
        total += len(got)
        time.sleep(0.005)
    assert total == n and max(sizes) <= POLL_MAX_MESSAGES
    assert src.info.loading is None and not src.alive
    src.stop()


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
    got = read_all(src)
    assert [m.time_s for m in got] == [1.0, 1.5]
    assert src.bad_rows == 2 and src.rows_read == 2
