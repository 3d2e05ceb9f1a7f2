"""A recording's rows written and read back: each column's value comes back as it was written, and an
odd or hostile cell is refused or read as not available (a summary row's interval in its own columns,
``ci_low``/``ci_high``, and in a file from before them: tests/test_csv_interval.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpudash.core.metrics import METRICS, Origin
from gpudash.core.protocol import Event, EventKind, GpuReading, GpuSample, Sample
from gpudash.recording import csvformat
from gpudash.recording.csvformat import RowParser
from gpudash.recording.csvread import read_table
from gpudash.stats.segments import Segment, SegmentTracker


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


# -- every column, written and read back --------------------------------------------------------------

GPUS = (2, 0)  # watched in this order: GPU 2's columns come first


def exact_floats(*origins: Origin) -> dict[str, Any]:
    """A value for every float metric of ``origins`` that the CSV writes with 6 significant digits:
    each different from the others, exact in binary, of 5 or 6 digits (the k-th: k × 1000 + 0.5),
    so that one rounded, or read back into another field, shows."""
    floats = [m.key for m in METRICS if m.origin in origins and m.kind is float and m.csv_decimals is None]
    return {key: k * 1000 + 0.5 for k, key in enumerate(floats, 1)}


def full_sample() -> Sample:
    return Sample(
        time_s=1234.567,  # 3 decimals, more than 6 significant digits
        workload="encdec",
        variant="pipelined",
        batch_size=16,
        steps=123456789,
        samples=1975308624,
        knobs="amp=bf16,cuda_graph=on",
        world_size=4,
        slowest_rank=3,
        flops_per_step=3.0625e12,  # whole
        **exact_floats(Origin.WORKLOAD, Origin.RANKS, Origin.ALLOCATOR, Origin.MODEL),
    )


def full_gpu() -> GpuSample:
    return GpuSample(
        time_s=1234.567,
        energy_j=12345.678,  # 3 decimals
        throttle="sw_power_cap|hw_slowdown",
        per_gpu=(
            GpuReading(2, 97.5, 30123.5, None, 412.375, 1980.0, 61.0, 84.5, 78.125, 22.75),
            GpuReading(0, 3.25, 1024.5, None, 71.125, 345.0, 33.0),
        ),
        **exact_floats(Origin.NVML, Origin.GPM),
    )


def test_a_sample_row_reads_back_as_the_sample_and_the_nvml_sample_it_joined(tmp_path: Path) -> None:
    s, g = full_sample(), full_gpu()
    header = csvformat.header(GPUS)
    cells = csvformat.row_cells(csvformat.sample_row(s, g, {"joules_per_step": 1.78125}), g, GPUS)
    row = as_dict(header, cells)
    for column in csvformat.SAMPLE_COLUMNS[3:] + csvformat.LATER_SAMPLE_COLUMNS + csvformat.MODEL_COLUMNS:
        assert float(row[column]) == getattr(s, column), column  # every measured field
    for column in csvformat.GPU_COLUMNS + csvformat.GPM_COLUMNS:
        assert (
            row[column] == str(getattr(g, column)) if column == "throttle" else float(row[column]) == getattr(g, column)
        ), column
    assert (row["row_kind"], row["time_s"], row["energy_j"]) == ("sample", "1234.567", "12345.678")
    assert (row["workload"], row["variant"], row["batch_size"], row["knobs"]) == (
        "encdec",
        "pipelined",
        "16",
        "amp=bf16,cuda_graph=on",
    )
    assert (row["steps"], row["samples"], row["world_size"]) == ("123456789", "1975308624", "4")  # whole, exact
    assert row["joules_per_step"] == "1.78125"
    assert [row[c] for c in csvformat.per_gpu_columns([2])] == [
        *("97.5", "30123.5", "412.375", "1980", "61"),
        *("84.5", "78.125", "22.75"),  # GPM's SM, tensor and DRAM activity
    ]
    assert [row[c] for c in csvformat.per_gpu_columns([0])] == ["3.25", "1024.5", "71.125", "345", "33", "", "", ""]
    assert all(row[c] == "" for c in [*csvformat.EVENT_COLUMNS, *csvformat.CI_COLUMNS])
    path = tmp_path / "run.csv"
    path.write_text(csvformat.format_row(header) + csvformat.format_row(cells))
    back_header, rows = read_table(path)
    assert back_header == header
    assert RowParser(back_header).messages(rows[0][1]) == [g, s]  # NVML's first: the order the recorder saw them


def test_a_sample_without_an_nvml_sample_has_empty_gpu_cells_and_reads_back_alone() -> None:
    s = full_sample()
    header = csvformat.header(GPUS)
    cells = csvformat.row_cells(csvformat.sample_row(s, None), None, GPUS)
    row = as_dict(header, cells)
    gpu_columns = [*csvformat.GPU_COLUMNS, *csvformat.GPM_COLUMNS, *csvformat.per_gpu_columns(GPUS), "joules_per_step"]
    assert all(row[c] == "" for c in gpu_columns)
    assert RowParser(header).messages(cells) == [s]


def test_only_the_gpus_that_answered_make_an_nvml_sample() -> None:
    header = csvformat.header(GPUS)
    parser = RowParser(header)
    per_gpu_only = GpuSample(time_s=2.0, per_gpu=(GpuReading(2, 50.0), GpuReading(0)))
    cells = csvformat.row_cells(csvformat.sample_row(full_sample(), per_gpu_only), per_gpu_only, GPUS)
    msgs = parser.messages(cells)
    assert msgs[0] == GpuSample(
        time_s=1234.567, per_gpu=(GpuReading(2, 50.0), GpuReading(0))
    )  # the row's time; GPU 0 did not answer
    silent = GpuSample(time_s=2.0, per_gpu=(GpuReading(2), GpuReading(0)))
    cells = csvformat.row_cells(csvformat.sample_row(full_sample(), silent), silent, GPUS)
    assert [type(m) for m in parser.messages(cells)] == [Sample]


def test_per_gpu_cells_follow_the_gpus_watched_not_the_readings_order() -> None:
    g = full_gpu()
    assert csvformat.per_gpu_cells(g, [0, 2]) == [
        *("3.25", "1024.5", "71.125", "345", "33", "97.5", "30123.5", "412.375", "1980", "61"),  # NVML's
        *("", "", "", "84.5", "78.125", "22.75"),  # then GPM's, GPU 0 (none) and GPU 2
    ]
    assert csvformat.per_gpu_cells(g, [1]) == [""] * 8  # watched, but no reading of it this tick
    assert csvformat.per_gpu_cells(None, [0, 2]) == [""] * 16
    assert csvformat.per_gpu_cells(g, []) == []


def test_an_event_row_reads_back_as_the_event_with_what_runs_after_it() -> None:
    from gpudash.core.running import Running

    header = csvformat.header()
    e = Event(12.5, EventKind.CHANGED, "variant", "serial", "pipelined", 'variant: serial → "pipelined", now')
    cells = csvformat.event_row(e, Running("encdec", "pipelined", 8, "amp=bf16"))
    row = as_dict(header, cells)
    assert [row[c] for c in ("row_kind", "time_s", *csvformat.EVENT_COLUMNS)] == [
        "event",
        "12.500",
        "changed",
        "variant",
        "serial",
        "pipelined",
        'variant: serial → "pipelined", now',
    ]
    assert (row["workload"], row["variant"], row["batch_size"], row["knobs"]) == (
        "encdec",
        "pipelined",
        "8",
        "amp=bf16",
    )
    assert all(row[c] == "" for c in ("steps", "steps_per_s", "gpu_util_pct", "ci_low"))
    assert RowParser(header).messages(cells) == [e]
    unknown = as_dict(header, csvformat.event_row(Event(1.0, EventKind.STOPPED, message="done")))
    assert (unknown["workload"], unknown["variant"], unknown["batch_size"], unknown["knobs"]) == ("", "", "", "")


def test_a_summary_row_carries_each_averaged_metrics_mean_and_its_configuration() -> None:
    tracker = SegmentTracker()
    for i in range(20):
        s = full_sample()
        t = 1000.0 + 0.5 * i + 0.0625
        tracker.on_sample(Sample(**{**s.__dict__, "time_s": t, "steps_per_s": 200.0 + i % 2}))
        tracker.on_gpu(GpuSample(time_s=t, gpu_util_pct=90.0 + i % 2, power_w=400.0, energy_j=100.0 * i))
    seg = tracker.current
    assert seg is not None
    header = csvformat.header()
    row = as_dict(header, csvformat.summary_row(seg, 1234.5678))
    assert (row["row_kind"], row["time_s"]) == ("summary", "1234.568")  # 3 decimals, like every row's time
    assert (row["workload"], row["variant"], row["batch_size"], row["knobs"]) == (
        "encdec",
        "pipelined",
        "16",
        "amp=bf16,cuda_graph=on",
    )
    assert (row["event_kind"], row["event_what"]) == ("summary", "steps_per_s")
    assert row["event_message"] == seg.summary() and "encdec/pipelined bs16" in row["event_message"]
    for key in ("steps_per_s", "samples_per_s", "step_ms_p50", "syncs_per_step", "gpu_util_pct", "power_w"):
        assert float(row[key]) == pytest.approx(seg.mean(key), rel=1e-5), key
    assert float(row["steps_per_s"]) == pytest.approx(200.5, abs=0.03)
    for key in ("steps", "samples", "interval_s", "loss", "energy_j", "mem_total_mib", "temp_c", "throttle"):
        assert row[key] == "", key  # counters and readings that are not averaged


# -- odd and hostile cells ------------------------------------------------------------------------------


def sample_cells(header: list[str], **cells: str) -> list[str]:
    row = as_dict(header, csvformat.sample_row(sample(3.0, 50.0), None))
    row.update(cells)
    return [row[c] for c in header]


def test_numbers_that_are_not_finite_read_as_not_available() -> None:
    header = csvformat.header()
    parser = RowParser(header)
    (s,) = parser.messages(sample_cells(header, step_ms_p95="nan", loss="inf", syncs_per_step="-inf", world_size=""))
    assert isinstance(s, Sample)
    assert (s.step_ms_p95, s.loss, s.syncs_per_step) == (None, None, None)
    assert s.world_size == 1  # an empty later column: the Sample's default
    (s,) = parser.messages(sample_cells(header, batch_size="8.0", steps="150.0", slowest_rank="1e0"))
    assert isinstance(s, Sample) and (s.batch_size, s.steps, s.slowest_rank) == (8, 150, 1)


@pytest.mark.parametrize("column", ["steps", "samples", "interval_s"])
def test_a_sample_without_a_count_or_a_finite_interval_is_refused(column: str) -> None:
    header = csvformat.header()
    cells = ["", "nan", "inf"] if column == "interval_s" else [""]
    for cell in cells:
        with pytest.raises(ValueError, match=f"^{column} is empty or not a finite number$"):
            RowParser(header).messages(sample_cells(header, **{column: cell}))
    if column != "interval_s":  # a whole number column: a count that is not finite is no number at all
        for cell in ("nan", "inf"):
            with pytest.raises((ValueError, OverflowError)):
                RowParser(header).messages(sample_cells(header, **{column: cell}))


@pytest.mark.parametrize("time_s", ["-0.001", "1e9", "nan", "inf", "", "soon"])
def test_a_row_time_outside_the_run_is_refused(time_s: str) -> None:
    header = csvformat.header()
    with pytest.raises(ValueError):
        RowParser(header).messages(sample_cells(header, time_s=time_s))


def test_times_at_the_edges_of_the_run_are_read() -> None:
    header = csvformat.header()
    for t in ("0", "999999999.999"):
        (s,) = RowParser(header).messages(sample_cells(header, time_s=t))
        assert s.time_s == float(t)
    with pytest.raises(ValueError, match="outside 0..1e"):
        RowParser(header).messages(sample_cells(header, time_s="1000000000"))


def test_a_cell_of_the_wrong_kind_is_refused() -> None:
    header = csvformat.header()
    for column, cell in (("steps_per_s", "fast"), ("batch_size", "eight"), ("power_w", "1,5")):
        with pytest.raises(ValueError):
            RowParser(header).messages(sample_cells(header, **{column: cell}))


def test_rows_of_other_kinds_and_summaries_give_no_messages() -> None:
    header = csvformat.header()
    parser = RowParser(header)
    seg = segment(ALTERNATING)
    assert parser.messages(csvformat.summary_row(seg, 30.0)) == []
    assert parser.messages(sample_cells(header, row_kind="note")) == []


def test_an_older_file_reads_its_samples_with_the_defaults_of_the_columns_it_lacks() -> None:
    s = full_sample()
    header = csvformat.COLUMNS_0_1  # 0.1: no knobs, ranks, allocator or ci columns
    full = as_dict(csvformat.header(), csvformat.sample_row(s, None))
    (back,) = RowParser(header).messages([full[c] for c in header])
    assert isinstance(back, Sample)
    assert back.knobs == "none" and back.world_size == 1 and back.cuda_allocated_mib is None
    assert (back.steps_per_s, back.steps, back.batch_size) == (s.steps_per_s, s.steps, s.batch_size)
    no_knobs = as_dict(header, [full[c] for c in header])
    with_empty_knobs = [*no_knobs.values(), ""]  # a knobs column left empty reads as "none" too
    (back,) = RowParser([*header, "knobs"]).messages(with_empty_knobs)
    assert isinstance(back, Sample) and back.knobs == "none"


def test_a_header_is_a_recordings_when_it_starts_as_0_1s() -> None:
    assert csvformat.is_recording_header(csvformat.header(GPUS))
    assert csvformat.is_recording_header(list(csvformat.COLUMNS_0_1))
    assert not csvformat.is_recording_header(csvformat.COLUMNS_0_1[1:])
    assert not csvformat.is_recording_header(["workload", "variant"])
    assert csvformat.missing_columns(csvformat.header()) == []
    assert csvformat.missing_columns(["row_kind", "steps", "time_s"])[:3] == ["workload", "variant", "batch_size"]
    assert csvformat.missing_columns([c for c in csvformat.COLUMNS_0_1 if c != "loss"]) == ["loss"]


def test_per_gpu_columns_are_found_only_whole_and_in_their_order() -> None:
    assert csvformat.per_gpu_columns([3]) == [
        "gpu3_util_pct",
        "gpu3_mem_used_mib",
        "gpu3_power_w",
        "gpu3_sm_clock_mhz",
        "gpu3_temp_c",
        "gpu3_sm_active_pct",
        "gpu3_tensor_active_pct",
        "gpu3_dram_active_pct",
    ]
    assert csvformat.per_gpu_indexes(csvformat.header((5, 1, 10))) == [5, 1, 10]
    partial = [*csvformat.header((1,)), *csvformat.per_gpu_columns([2])[:4]]  # GPU 2 lacks its temperature
    assert csvformat.per_gpu_indexes(partial) == [1]
    odd = ["gpu01_util_pct", "gpu_util_pct", "xgpu1_util_pct", *csvformat.per_gpu_columns([7])]
    assert csvformat.per_gpu_indexes(odd) == [7]


def test_a_row_is_one_csv_line_quoted_where_it_must_be() -> None:
    assert csvformat.format_row(["a", "b,c", 'say "hi"', ""]) == 'a,"b,c","say ""hi""",\n'
    assert csvformat.format_row(["two\nlines"]) == '"two\nlines"\n'


def test_a_configuration_that_ended_in_its_warm_up_still_gets_a_summary_row() -> None:
    tracker = SegmentTracker()
    tracker.on_sample(sample(0.5, 80.0))  # its one sample, inside the warm-up
    seg = tracker.current
    assert seg is not None and seg.estimate("steps_per_s") is None
    row = as_dict(csvformat.header(), csvformat.summary_row(seg, 0.75))
    assert float(row["steps_per_s"]) == 80.0  # the warm-up's mean, for want of another
    assert (row["ci_low"], row["ci_high"]) == ("", "")
    assert "no samples after warm-up" in row["event_message"]


def test_a_header_without_some_columns_reads_them_as_not_available() -> None:
    """``RowParser`` looks each column up by name: one the header lacks is empty (an event's text)
    or not available (a measurement)."""
    header = ["row_kind", "time_s", "event_kind", "steps", "samples", "interval_s", "steps_per_s", "power_w"]
    parser = RowParser(header)

    assert parser.messages(["event", "1.5", "stopped", "", "", "", "", ""]) == [Event(1.5, EventKind.STOPPED)]
    (g, s) = parser.messages(["sample", "2.0", "", "10", "80", "0.5", "20.0", "300.5"])
    assert g == GpuSample(time_s=2.0, power_w=300.5)
    assert isinstance(s, Sample) and (s.steps, s.steps_per_s, s.knobs) == (10, 20.0, "none")
    assert (s.workload, s.loss) == (None, None)
