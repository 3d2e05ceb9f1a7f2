"""The catalogs are the one place their facts live: variants, metrics, actions."""

from __future__ import annotations

import ast
import csv
import io
from dataclasses import fields
from pathlib import Path

import pytest

from gpudash.core.metrics import (
    ALLOCATOR_KEYS,
    GPM_KEYS,
    METRICS,
    MODEL_KEYS,
    NVML_KEYS,
    PER_GPU_KEYS,
    RANK_KEYS,
    STAT_KEYS,
    TRAINING_KEYS,
    WORKLOAD_KEYS,
    Origin,
    keys,
)
from gpudash.core.protocol import Event, EventKind, GpuReading, GpuSample, Sample, SetBatchSize
from gpudash.recording import csvformat
from gpudash.recording.record import CsvRecorder
from gpudash.recording.replay import ReplaySource, read_all
from gpudash.tui.demo import SyntheticSource
from gpudash.tui.state import DashState
from tests import printed
from tests.helpers import CSV_COLUMNS_0_1
from tests.messages import present
from workloads.catalog_types import Fix, WorkloadError
from workloads.registry import FAMILIES, family

ROOT = Path(__file__).resolve().parent.parent


def test_csv_columns_derive_from_the_metric_catalog_and_keep_the_0_1_order() -> None:
    assert csvformat.COLUMNS == [
        *CSV_COLUMNS_0_1,
        "knobs",
        "world_size",
        "slowest_rank",
        "slowest_rank_step_ms",
        "cuda_allocated_mib",
        "cuda_reserved_mib",
        "ci_low",
        "ci_high",
        "noise",
        *("sm_active_pct", "sm_occupancy_pct", "tensor_active_pct", "hmma_active_pct", "dfma_active_pct"),
        *("dram_active_pct", "pcie_tx_mib_s", "pcie_rx_mib_s", "nvlink_tx_mib_s", "nvlink_rx_mib_s"),
        *("flops_per_step", "tflops", "mfu_pct"),
        "train_s",  # a job's training seconds (after GPM's per-GPU columns in a header)
        *("rank", "node", "input_wait_pct", "allreduce_exposed_ms"),  # a rank row's own, last
        *("own_ms", "comm_ms"),  # ... and its own work and collectives' time, after those
        *("mem_params_mib", "mem_grads_mib", "mem_optimizer_mib", "mem_activations_mib"),  # a job's memory, last
        *("mem_peak_mib", "mem_rss_mib"),
        "event_data",  # an event's details and typed data (JSON), last
    ]  # after 0.1, at the end
    later = (Origin.RANKS, Origin.ALLOCATOR, Origin.GPM, Origin.MODEL, Origin.TRAINING, Origin.MEMORY)
    before_ranks = [m.csv_column for m in METRICS if m.origin not in later]
    assert before_ranks == [c for c in CSV_COLUMNS_0_1 if c in {m.key for m in METRICS}]


def test_the_allocators_memory_goes_to_the_csv_and_back_and_older_files_read_it_as_empty(tmp_path: Path) -> None:
    sample = Sample(
        1.0,
        "encdec",
        "serial",
        8,
        10,
        80,
        0.25,
        40.0,
        320.0,
        25.0,
        26.0,
        0.0,
        cuda_allocated_mib=612.5,
        cuda_reserved_mib=704.0,
    )
    path = tmp_path / "run.csv"
    path.write_text("".join(csvformat.format_row(r) for r in (csvformat.header(), csvformat.sample_row(sample, None))))
    back = [m for m in read_all(ReplaySource(path)) if isinstance(m, Sample)]
    assert (back[0].cuda_allocated_mib, back[0].cuda_reserved_mib) == (612.5, 704.0)
    before = csvformat.COLUMNS.index("cuda_allocated_mib")  # a recording made before these columns
    rows = [r[:before] for r in (csvformat.header(), csvformat.sample_row(sample, None))]
    path.write_text("".join(csvformat.format_row(r) for r in rows))
    back = [m for m in read_all(ReplaySource(path)) if isinstance(m, Sample)]
    assert back[0].steps == 10 and (back[0].cuda_allocated_mib, back[0].cuda_reserved_mib) == (None, None)


def test_every_measured_field_has_one_metric_row() -> None:
    sample_fields = [f.name for f in fields(Sample) if f.name != "time_s"]
    config = (*csvformat.CONFIG_COLUMNS, csvformat.KNOBS_COLUMN, csvformat.NOISE_COLUMN)  # text, not measured
    measured = [*WORKLOAD_KEYS, *RANK_KEYS, *ALLOCATOR_KEYS, *MODEL_KEYS, *TRAINING_KEYS, *keys(Origin.MEMORY)]
    assert measured == [f for f in sample_fields if f not in config]
    # gpu_pids: read for the noise probe (gpudash.host.noise), not a metric; mig: each instance's GPM figures
    not_metrics = ("time_s", "per_gpu", "gpu_pids", "mig")
    assert [*NVML_KEYS, *GPM_KEYS] == [f.name for f in fields(GpuSample) if f.name not in not_metrics]
    # a per-GPU reading: the catalog's per-GPU metrics (its CSV columns) and the memory total for the row
    assert [f.name for f in fields(GpuReading) if f.name not in ("index", "mem_total_mib")] == list(PER_GPU_KEYS)
    assert len({m.key for m in METRICS}) == len(METRICS)


def test_the_stats_panel_shows_the_catalogs_stat_metrics_in_order() -> None:
    assert [r.metric.key for r in DashState().stat_rows()] == list(STAT_KEYS)
    assert STAT_KEYS[:2] == ("steps_per_s", "samples_per_s")


def _record_synthetic_run(path: Path, seconds: float = 8.0) -> list:
    """A synthetic GPU run with a batch change, recorded with the real CsvRecorder."""
    now = [0.0]
    src = SyntheticSource(gpu=True, clock=lambda: now[0], startup_s=0.5, seed=3)
    src.start()
    rec = CsvRecorder(str(path), {})
    msgs = []
    while now[0] < seconds:
        now[0] += 0.25
        if abs(now[0] - seconds / 2) < 1e-9:
            src.send(SetBatchSize(16))
        for m in src.poll():
            rec.on_message(m)
            msgs.append(m)
    rec.close()
    return msgs


def test_csv_and_screen_agree_on_joules_per_step(tmp_path: Path) -> None:
    """The J/step column of a recording and the stats panel's "now" J/step are the same
    figure at every sample: live (the messages as they came) and replayed (the file)."""
    path = tmp_path / "run.csv"
    msgs = _record_synthetic_run(path)
    rows = [r for r in csv.DictReader(io.StringIO(path.read_text())) if r["row_kind"] == "sample"]
    in_csv = [float(r["joules_per_step"]) if r["joules_per_step"] else None for r in rows]
    assert sum(v is not None for v in in_csv) > len(in_csv) // 2  # the figure is there, mostly

    live, on_screen = DashState(), []
    for m in msgs:
        live.ingest(m)
        if isinstance(m, Sample):
            on_screen.append(live.now("joules_per_step"))
    assert on_screen == pytest.approx(in_csv, rel=1e-5)  # the CSV keeps 6 significant digits

    replayed, from_file = DashState(mode="whole"), []
    for m in read_all(ReplaySource(path)):
        replayed.ingest(m)
        if isinstance(m, Sample):
            from_file.append(replayed.now("joules_per_step"))
    assert from_file == pytest.approx(in_csv, rel=1e-5)


def test_every_variant_refusal_is_the_catalogs_one_message() -> None:
    for fam in FAMILIES.values():
        for v in fam.variants:
            assert v.family == fam.name
            assert v.refusal("cuda:0") is None
            why = v.refusal("cpu")
            assert (why is not None) == v.needs_cuda
            if why:
                assert why.startswith(f"{fam.name}/{v.name} needs CUDA")
            assert fam.refusal(v.name, "cpu") == why
    assert "unknown variant 'nope'" in present(family("encdec").refusal("nope", "cuda"))
    with pytest.raises(WorkloadError, match="choose one of"):
        family("augment").variant("nope")


def test_the_input_pipeline_ladder_adds_one_fix_per_step() -> None:
    ladder = family("input_pipeline").variants
    assert ladder[0].fixes == frozenset()
    for before, after in zip(ladder, ladder[1:], strict=False):
        assert before.fixes < after.fixes and len(after.fixes - before.fixes) == 1
    assert ladder[-1].fixes == frozenset(Fix)


def test_the_input_pipeline_ladder_ends_with_the_colour_conversion_then_the_decode_on_the_gpu() -> None:
    ladder = family("input_pipeline").variants
    assert [v.name for v in ladder] == [
        "baseline",
        "workers",
        "dilation",
        "reorder",
        "batch-transform",
        "gpu-transform",
        "gpu-decode",
    ]
    before, colour, decode = ladder[-3:]
    assert colour.fixes - before.fixes == {Fix.GPU_COLOUR}
    assert colour.summary == f"+ {Fix.GPU_COLOUR.value}" and not colour.needs_cuda
    assert decode.fixes - colour.fixes == {Fix.GPU_DECODE}
    assert decode.summary == f"+ {Fix.GPU_DECODE.value}" and decode.needs_cuda


def _string_constants(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text())
    return [(n.lineno, n.value) for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def test_no_variant_name_is_written_outside_the_catalog_and_its_family() -> None:
    # "cpu", "gpu" and "workers" are also device names and option keys: left out of this check
    shared_words = {"cpu", "gpu", "workers"}
    owner = {v.name: f.name for f in FAMILIES.values() for v in f.variants if v.name not in shared_words}
    found = []
    for path in [*ROOT.joinpath("gpudash").rglob("*.py"), *ROOT.joinpath("workloads").rglob("*.py")]:
        if path.name == "registry.py":
            continue
        for line, text in _string_constants(path):
            if text in owner and not (path.parent.name == "workloads" and path.stem == owner[text]):
                found.append(f"{path.relative_to(ROOT)}:{line} {text!r}")
    assert found == []


def test_event_kinds_parse_from_the_csv_and_refuse_unknown_ones() -> None:
    e = Event(1.0, EventKind.CHANGED, "variant", "serial", "pipelined")
    assert e.kind.value == "changed" and e.label == "variant: serial → pipelined"
    with pytest.raises(ValueError):
        Event(1.0, "exploded")  # type: ignore[arg-type]  # a kind as a CSV gives it: text, here unknown


def test_every_chart_line_is_a_charted_metric_of_the_catalog() -> None:
    from gpudash.core.metrics import SERIES_KEYS
    from gpudash.tui.chart_specs import CHARTS

    drawn = [line.key for chart in CHARTS for line in chart.lines]
    assert set(drawn) <= set(SERIES_KEYS) and len(drawn) == len(set(drawn))


def test_every_metric_says_where_it_comes_from() -> None:
    for m in METRICS:
        assert m.origin in Origin and m.label and m.description
        if m.stat:
            assert m.mean is not None, f"{m.key}: a stats column needs a way to average it"


@pytest.mark.gpu
def test_csv_and_screen_agree_on_joules_per_step_with_the_real_engine_and_nvml(tmp_path: Path) -> None:
    """On a GPU: the workload child and the real NVML sampler, one recording and one
    dashboard state fed the same messages, the same J/step at every sample."""
    import time

    from gpudash.core.protocol import RunConfig
    from gpudash.host.session import EngineSession

    session = EngineSession(RunConfig(workload="encdec", device="cuda"), log_path=tmp_path / "child.log")
    rec = CsvRecorder(str(tmp_path / "run.csv"), {})
    state, on_screen = DashState(), list[float | None]()
    session.start()
    assert session.gpu_info.available, session.gpu_info.unavailable  # a GPU test: NVML must be there
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and sum(v is not None for v in on_screen) < 20:
            for m in session.poll():
                rec.on_message(m)
                state.ingest(m)
                if isinstance(m, Sample):
                    on_screen.append(state.now("joules_per_step"))
            time.sleep(0.05)
    finally:
        session.stop()
        rec.close()
    rows = [r for r in csv.DictReader(io.StringIO((tmp_path / "run.csv").read_text())) if r["row_kind"] == "sample"]
    in_csv = [float(r["joules_per_step"]) if r["joules_per_step"] else None for r in rows]
    assert sum(v is not None for v in in_csv) >= 20
    assert on_screen == pytest.approx(in_csv[: len(on_screen)], rel=1e-5)


def test_a_recording_carries_each_configurations_verdict_as_the_screen_shows_it(tmp_path: Path) -> None:
    """At each change and at the end the CSV gets a summary row: the configuration's mean and
    95% interval, the same figures the stats panel shows for it."""
    path = tmp_path / "run.csv"
    msgs = _record_synthetic_run(path, seconds=12.0)
    rows = list(csv.DictReader(io.StringIO(path.read_text())))
    summaries = [r for r in rows if r["row_kind"] == "summary"]
    assert [r["batch_size"] for r in summaries] == ["8", "16"]  # one per configuration, in order
    state = DashState()
    for m in msgs:
        state.ingest(m)
    parser = csvformat.RowParser(list(rows[0]))
    for row, seg in zip(summaries, state.segments, strict=False):
        e = present(seg.estimate("steps_per_s"))
        assert float(row["steps_per_s"]) == pytest.approx(e.mean, rel=1e-5)
        assert float(row["ci_low"]) == pytest.approx(e.low, rel=1e-5)
        assert float(row["ci_high"]) == pytest.approx(e.high, rel=1e-5)
        assert parser.interval(list(row.values())) == pytest.approx((e.low, e.high), rel=1e-5)
        assert (row["event_before"], row["event_after"]) == ("", "")  # the interval has its own columns now
        said = printed.summary(row["event_message"])
        assert said is not None and said.label == seg.label and said.figure.has_interval, row["event_message"]
    assert rows[-1]["row_kind"] == "summary"  # the end of the run closes the last one
    assert all(r["event_kind"] == "summary" for r in summaries)
