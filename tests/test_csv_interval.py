"""A summary row's interval in a recording: in its own columns (``ci_low``/``ci_high``), empty where
there is none, of zero width where there is no spread, none in a sample's or an event's row, and a
file from before those columns (the real H100 recording among them) reads it from
``event_before``/``event_after`` (every other column written and read back:
tests/test_csv_roundtrip.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpudash.core.protocol import Event, EventKind
from gpudash.recording import csvformat
from gpudash.recording.csvformat import RowParser
from gpudash.recording.csvread import read_table
from tests.test_csv_roundtrip import ALTERNATING, as_dict, sample, segment

ROOT = Path(__file__).resolve().parent.parent
H100_RECORDING = ROOT / "docs" / "img" / "dashboard-h100.csv"  # a real recording, from before ci_low/ci_high


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

    header = csvformat.header()
    parser = RowParser(header)
    for cells in (csvformat.sample_row(sample(1.0, 50.0), None), csvformat.event_row(Event(2.0, EventKind.STOPPED))):
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


def test_a_summary_with_no_spread_has_an_interval_of_zero_width_and_odd_cells_have_none() -> None:
    seg = segment([100.0] * 20)  # the same throughput every time: certain
    header = csvformat.header()
    parser = RowParser(header)
    cells = csvformat.summary_row(seg, 11.0)
    assert parser.interval(cells) == (100.0, 100.0)
    at = {c: i for i, c in enumerate(header)}

    def with_ci(low: str, high: str) -> list[str]:
        odd = list(cells)
        odd[at["ci_low"]], odd[at["ci_high"]] = low, high
        return odd

    for low, high in (("", "101"), ("99", ""), ("nan", "101"), ("99", "inf"), ("101", "99")):
        assert parser.interval(with_ci(low, high)) is None, (low, high)  # half, not finite, or reversed
    with pytest.raises(ValueError):
        parser.interval(with_ci("fast", "101"))  # not a number: the row is bad, as any other bad cell
    assert RowParser(["row_kind", "time_s"]).interval(["summary", "1.0"]) is None  # no interval column at all
