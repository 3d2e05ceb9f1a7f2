"""A recording's rows written and read back: each column's value comes back as it was written, a
summary row's interval in its own columns (``ci_low``/``ci_high``), and a file from before those
columns still reads its interval from ``event_before``/``event_after``."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpudash.core.protocol import Sample
from gpudash.recording import csvformat
from gpudash.recording.csvformat import RowParser, read_table
from gpudash.stats.segments import Segment, SegmentTracker

ROOT = Path(__file__).resolve().parent.parent
H100_RECORDING = ROOT / "docs" / "img" / "dashboard-h100.csv"  # a real recording, from before ci_low/ci_high


def sample(t: float, steps_per_s: float, **kw: object) -> Sample:
    """A sample of encdec/serial bs8 at ``t`` s, 0.5 s long."""
    fields: dict[str, object] = dict(
        time_s=t,
        workload="encdec",
        variant="serial",
        batch_size=8,
        steps=int(t * 100),
        samples=int(t * 800),
        interval_s=0.5,
        steps_per_s=steps_per_s,
        samples_per_s=steps_per_s * 8,
        step_ms_p50=1000 / steps_per_s,
        step_ms_p95=1100 / steps_per_s,
        syncs_per_step=0.0,
    )
    fields.update(kw)
    return Sample(**fields)  # type: ignore[arg-type]


def segment(values: list[float]) -> Segment:
    """A segment of encdec/serial bs8 whose samples after warm-up are ``values`` (steps/s)."""
    tracker = SegmentTracker()
    for i, v in enumerate([90.0, *values]):  # the first sample (its second, SETTLE_S) is warm-up
        tracker.on_sample(sample(0.5 * (i + 1), v))
    seg = tracker.current
    assert seg is not None
    return seg


ALTERNATING = [100.0 + (3.0 if i % 2 else -3.0) + 0.1 * (i % 5) for i in range(40)]


def as_dict(header: list[str], cells: list[str]) -> dict[str, str]:
    return dict(zip(header, cells, strict=True))


# -- the summary row's interval -------------------------------------------------------------------


def test_a_summary_row_carries_its_interval_in_ci_low_and_ci_high() -> None:
    seg = segment(ALTERNATING)
    e = seg.estimate("steps_per_s")
    assert e is not None and e.has_interval
    header = csvformat.header()
    row = as_dict(header, csvformat.summary_row(seg, 21.5))
    assert (float(row["ci_low"]), float(row["ci_high"])) == pytest.approx((e.low, e.high), rel=1e-5)
    assert float(row["ci_low"]) < float(row["steps_per_s"]) < float(row["ci_high"])
    assert (row["event_before"], row["event_after"]) == ("", "")  # no longer stuffed into the event's columns
    assert (row["row_kind"], row["event_kind"], row["event_what"]) == ("summary", "summary", "steps_per_s")
    assert RowParser(header).interval(csvformat.summary_row(seg, 21.5)) == pytest.approx((e.low, e.high), rel=1e-5)


def test_a_summary_too_short_for_an_interval_leaves_the_ci_cells_empty() -> None:
    seg = segment([100.0, 101.0])
    row = as_dict(csvformat.header(), csvformat.summary_row(seg, 3.0))
    assert (row["ci_low"], row["ci_high"]) == ("", "")
    assert float(row["steps_per_s"]) == pytest.approx(100.5)
    assert RowParser(csvformat.header()).interval(csvformat.summary_row(seg, 3.0)) is None


def test_sample_and_event_rows_have_empty_ci_cells_and_no_interval() -> None:
    from gpudash.core.protocol import Event

    header = csvformat.header()
    parser = RowParser(header)
    for cells in (csvformat.sample_row(sample(1.0, 50.0), None), csvformat.event_row(Event(2.0, "stopped"))):
        row = as_dict(header, cells)
        assert (row["ci_low"], row["ci_high"]) == ("", "")
        assert parser.interval(cells) is None


def test_an_older_file_without_ci_columns_reads_the_interval_from_event_before_and_after(tmp_path: Path) -> None:
    """A recording made before ``ci_low``/``ci_high``: its summary rows carry the interval in
    ``event_before`` (low) and ``event_after`` (high); it reads, replays and reports as before."""
    seg = segment(ALTERNATING)
    e = seg.estimate("steps_per_s")
    assert e is not None and e.low is not None and e.high is not None
    new_header = csvformat.header()
    old_header = [c for c in new_header if c not in csvformat.CI_COLUMNS]
    row = as_dict(new_header, csvformat.summary_row(seg, 21.5))
    row["event_before"], row["event_after"] = row.pop("ci_low"), row.pop("ci_high")
    old_summary = [row[c] for c in old_header]
    samples = [as_dict(new_header, csvformat.sample_row(sample(0.5 * i, 100.0 + i % 3), None)) for i in range(1, 30)]
    path = tmp_path / "old.csv"
    path.write_text(
        "".join(csvformat.format_row(r) for r in [old_header, *([s[c] for c in old_header] for s in samples)])
        + csvformat.format_row(old_summary)
    )
    header, rows = read_table(path)
    assert "ci_low" not in header
    parser = RowParser(header)
    (interval,) = [parser.interval(cells) for _, cells in rows if cells[0] == "summary"]
    assert interval == pytest.approx((e.low, e.high), rel=1e-5)
    assert all(parser.interval(cells) is None for _, cells in rows if cells[0] != "summary")
    from gpudash.report.load import load_run  # the report reads the old file as it did

    (config,) = load_run(path).configs
    assert config.steps is not None  # its samples after the first (warm-up):
    assert config.steps.mean == pytest.approx(100 + sum(i % 3 for i in range(2, 30)) / 28)


def test_the_real_h100_recording_from_before_the_ci_columns_reads_its_intervals() -> None:
    header, rows = read_table(H100_RECORDING)
    assert "ci_low" not in header and "event_before" in header
    parser = RowParser(header)
    intervals = [parser.interval(cells) for _, cells in rows if cells[0] == "summary"]
    assert len(intervals) == 4 and all(i is not None for i in intervals)
    assert intervals[0] == (243.829, 253.509)  # its first summary row: encdec/serial bs8, 248.7 ± 4.8
    assert intervals[1] == (177.981, 180.667)
    means = [float(cells[header.index("steps_per_s")]) for _, cells in rows if cells[0] == "summary"]
    assert all(low < m < high for (low, high), m in zip(intervals, means, strict=True))  # type: ignore[misc]
