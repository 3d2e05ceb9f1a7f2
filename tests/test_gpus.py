"""Every GPU of the box in the telemetry: the sampler's per-GPU readings, which GPUs it watches
(``--gpus``, ``CUDA_VISIBLE_DEVICES``), the per-GPU CSV columns and their replay. NVML is faked
at the ``pynvml`` boundary (tests/fake_gpus.py)."""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from gpudash.cli import main as cli
from gpudash.cli import parsers
from gpudash.cli.serve import as_argv
from gpudash.core.protocol import Event, EventKind, GpuSample, RunConfig, Sample
from gpudash.host.gpu_checks import check_gpus
from gpudash.host.gpu_selection import GpuSelectionError, gpu_indexes, gpu_list
from gpudash.host.nvml import NvmlSampler
from gpudash.recording import csvformat
from gpudash.recording.metadata import run_metadata
from gpudash.recording.record import CsvRecorder
from gpudash.recording.replay import ReplaySource, read_all
from tests.fake_gpus import fake_gpus, installer, readings
from tests.helpers import record_args
from tests.messages import present
from tests.tui.fakes import sample, started

PER_GPU = ["util_pct", "mem_used_mib", "power_w", "sm_clock_mhz", "temp_c"]  # NVML's, after the noise column
PER_GPU_GPM = ["sm_active_pct", "tensor_active_pct", "dram_active_pct"]  # GPM's, at the very end


def per_gpu_header(gpus: tuple[int, ...]) -> list[str]:
    """A recording's columns after the noise: NVML's per GPU, GPM's and the model's, GPM's per GPU,
    a job's training seconds, a rank row's own."""
    nvml = [f"gpu{i}_{c}" for i in gpus for c in PER_GPU]
    gpm = [f"gpu{i}_{c}" for i in gpus for c in PER_GPU_GPM]
    return [
        *nvml,
        *csvformat.GPM_COLUMNS,
        *csvformat.MODEL_COLUMNS,
        *gpm,
        *csvformat.TRAINING_COLUMNS,
        *csvformat.WORLD_COLUMNS,
        *csvformat.MEMORY_COLUMNS,
        csvformat.EVENT_DATA_COLUMN,
    ]


Machine = Callable[[int], ModuleType]  # machine(n): n fake GPUs installed as pynvml


@pytest.fixture
def machine(monkeypatch: pytest.MonkeyPatch) -> Machine:
    """``machine(n)``: a box of n fake GPUs behind ``pynvml``; CUDA_VISIBLE_DEVICES unset."""
    return installer(monkeypatch, fake_gpus)


def opened(index: int = 0, gpus: tuple[int, ...] | None = None) -> NvmlSampler:
    """A sampler of the workload's GPU ``index`` (and ``gpus``), opened over the fake NVML."""
    sampler = NvmlSampler(index, gpus=gpus)
    assert sampler.open().available, sampler.info.unavailable
    return sampler


def sampled(sampler: NvmlSampler) -> GpuSample:
    """The sampler's next tick, which the test expects to be there."""
    return present(sampler.sample(), "a GPU sample")


def row_of(g: GpuSample, index: int) -> tuple[float | None, ...]:
    r = next(r for r in g.per_gpu if r.index == index)
    return r.gpu_util_pct, r.mem_used_mib, r.power_w, r.sm_clock_mhz, r.temp_c


def expected(index: int) -> tuple[float, ...]:
    v = readings(index)
    return v["util"], v["mem_used_gib"] * 1024, v["power_w"], v["clock"], v["temp"]


# -- the sampler ------------------------------------------------------------------------------------
@pytest.mark.parametrize("count", [2, 4])
def test_one_reading_per_gpu_of_the_box(machine: Machine, count: int) -> None:
    nv = machine(count)
    s = opened(1)
    g = sampled(s)
    assert s.info.sampled == tuple(range(count))
    assert [r.index for r in g.per_gpu] == list(range(count))
    for i in range(count):
        assert row_of(g, i) == expected(i)
        assert g.per_gpu[i].mem_total_mib == 80 * 1024
    # today's fields stay the workload's GPU (1), and its row is the same reading, not a second query
    assert (g.gpu_util_pct, g.power_w) == (11.0, 110.0)
    assert nv.calls[1] == 8 and all(nv.calls[i] == 5 for i in range(count) if i != 1)


def test_gpus_option_selects_and_orders(machine: Machine) -> None:
    machine(4)
    g = sampled(opened(0, gpus=(3, 1)))
    assert [r.index for r in g.per_gpu] == [3, 1] and row_of(g, 3) == expected(3)
    assert g.gpu_util_pct == 10.0  # the workload's GPU is charted whether watched in a row or not


@pytest.mark.parametrize(
    ("visible", "watched"),
    [
        ("2,0", (2, 0)),  # indexes, in CUDA_VISIBLE_DEVICES' order
        ("GPU-0000-3,GPU-0000-1", (3, 1)),  # UUIDs
        ("1,7,2", (1,)),  # CUDA stops at the first entry that names no GPU
        ("MIG-abc,2", (2,)),  # a MIG slice: NVML reads the whole GPU, left out
        ("", ()),  # every GPU hidden: no rows
    ],
)
def test_cuda_visible_devices_selects_and_orders(
    machine: Machine, monkeypatch: pytest.MonkeyPatch, visible: str, watched: tuple[int, ...]
) -> None:
    machine(4)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    s = opened(watched[0] if watched else 0)
    assert s.info.sampled == watched
    assert tuple(r.index for r in sampled(s).per_gpu) == watched


def test_gpus_option_wins_over_cuda_visible_devices(machine: Machine, monkeypatch: pytest.MonkeyPatch) -> None:
    machine(4)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    assert opened(2, gpus=(0,)).info.sampled == (0,)


def test_a_gpu_failing_mid_run_reads_none_while_the_others_update(machine: Machine) -> None:
    nv = machine(4)
    s = opened(0)
    first = sampled(s)
    assert all(r.answered for r in first.per_gpu)
    nv.lost.add(2)  # GPU 2 falls off the bus
    nv.gpus[1]["util"] = 77.0
    nv.gpus[0]["power_w"] = 321.0
    after = [sampled(s), sampled(s)]
    for g in after:
        assert not g.per_gpu[2].answered and row_of(g, 2) == (None,) * 5
        assert row_of(g, 1)[0] == 77.0 and row_of(g, 3) == expected(3)
        assert g.power_w == 321.0 and row_of(g, 0)[2] == 321.0  # the workload's GPU goes on
    assert s.info.available
    assert nv.calls[2] == 5 + 1  # asked once after it was lost, then no more


def test_unknown_gpu_index(machine: Machine) -> None:
    machine(2)
    with pytest.raises(GpuSelectionError, match=r"--gpus 0,2: no GPU 2 \(this machine has GPUs 0–1"):
        check_gpus((0, 2))
    check_gpus((1, 0))  # both there
    info = NvmlSampler(0, gpus=(5,)).open()  # a caller that skipped the check: no rows, and says why
    assert not info.available and "no GPU 5" in present(info.unavailable)


def test_without_nvml_a_gpu_asked_for_is_refused_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)
    with pytest.raises(GpuSelectionError, match=r"^--gpus 3: no GPU to watch here \(.+\); leave --gpus out$"):
        check_gpus((3,))  # the README: a GPU the machine lacks is one line and exit 2
    check_gpus(None)  # without --gpus the run goes on and the dashboard says why NVML is unavailable


@pytest.mark.parametrize("text", ["x", "0,,1", "-1", "1,1", ""])
def test_gpus_argument_is_indexes_once_each(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        gpu_list(text)
    assert gpu_list(" 2, 0") == "2,0" and gpu_indexes("2,0") == (2, 0)


def test_serve_passes_gpus_on_to_the_dashboard_it_starts() -> None:
    _, commands = parsers.build_parsers()
    given = vars(commands["run"].parse_args(["--gpus", "2,0", "--device", "cpu"]))
    assert as_argv(commands["run"], given) == ["--device=cpu", "--gpus=2,0"]


def test_cli_refuses_a_gpu_the_machine_lacks_in_one_line(
    machine: Machine, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    machine(2)
    assert cli.main(["--record", str(tmp_path / "run.csv"), "--device", "cpu", "--gpus", "0,4"]) == 2
    err = capsys.readouterr().err
    assert err == "gpudash: error: --gpus 0,4: no GPU 4 (this machine has GPUs 0–1; see nvidia-smi -L)\n"
    assert not (tmp_path / "run.csv").exists()


def test_cli_refuses_a_malformed_gpus_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(["--gpus", "0,x"])
    assert exit_.value.code == 2
    assert capsys.readouterr().err.splitlines() == [
        "gpudash: error: argument --gpus: expected GPU indexes separated by commas (0,2), got '0,x'"
    ]


# -- the CSV ------------------------------------------------------------------------------------------
def table(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    """A recording's header and its rows."""
    with path.open() as f:
        reader = csv.DictReader(f)
        rows = list(reader)
        return list(reader.fieldnames or ()), rows


def samples_in(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    return [r for r in rows if r["row_kind"] == "sample"]


def column(rows: list[dict[str, str]], name: str) -> list[float | None]:
    """One column of ``rows`` as numbers (None where empty)."""
    return [float(r[name]) if r[name] else None for r in rows]


def recording(tmp_path: Path, sampler: NvmlSampler, ticks: int = 3) -> Path:
    """A recording with a sample row per NVML tick, as the recorder writes it."""
    path = tmp_path / "run.csv"
    rec = CsvRecorder(path, run_metadata(RunConfig(), sampler.info))
    rec.on_message(started())
    for k in range(1, ticks + 1):
        g = sampled(sampler)
        rec.on_message(GpuSample(k * 0.5, g.gpu_util_pct, per_gpu=g.per_gpu))
        rec.on_message(sample(k * 0.5, 100.0))
    rec.close()
    return path


def test_csv_appends_columns_per_gpu_watched_and_keeps_todays(machine: Machine, tmp_path: Path) -> None:
    machine(4)
    path = recording(tmp_path, opened(0, gpus=(2, 0)))
    cols, every_row = table(path)
    rows = samples_in(every_row)
    earlier = csvformat.COLUMNS.index("noise") + 1  # the columns before GPM's and the model's
    assert cols[:earlier] == csvformat.COLUMNS[:earlier]  # 0.1's readers read the prefix
    assert cols[earlier:] == per_gpu_header((2, 0))
    assert csvformat.is_recording_header(cols)
    assert column(rows, "gpu2_util_pct") == [12.0] * 3 and column(rows, "gpu0_sm_clock_mhz") == [1400.0] * 3
    assert column(rows, "gpu2_mem_used_mib") == [3 * 1024.0] * 3
    assert all(r["gpu2_power_w"] == "" for r in every_row if r["row_kind"] != "sample")  # events, summaries: empty
    assert json.loads(path.with_suffix(".json").read_text())["gpus_sampled"] == [2, 0]


def test_a_lost_gpu_is_empty_cells_and_replays_as_no_answer(machine: Machine, tmp_path: Path) -> None:
    nv = machine(2)
    s = opened(0)
    sampled(s)
    nv.lost.add(1)
    path = recording(tmp_path, s, ticks=2)
    msgs = read_all(ReplaySource(path))
    gpu = [m for m in msgs if isinstance(m, GpuSample)]
    assert len(gpu) == 2 and all(g.per_gpu[0].answered and not g.per_gpu[1].answered for g in gpu)


@pytest.mark.parametrize("count", [2, 4])
def test_replay_gives_back_the_per_gpu_readings(machine: Machine, tmp_path: Path, count: int) -> None:
    machine(count)
    path = recording(tmp_path, opened(0))
    msgs = read_all(ReplaySource(path))
    gpu = [m for m in msgs if isinstance(m, GpuSample)]
    assert len(gpu) == 3 and sum(isinstance(m, Sample) for m in msgs) == 3
    assert all([r.index for r in g.per_gpu] == list(range(count)) for g in gpu)
    assert all(row_of(gpu[-1], i) == expected(i) for i in range(count))


def test_a_recording_without_per_gpu_columns_replays_as_before(tmp_path: Path) -> None:
    path = tmp_path / "old.csv"
    rows = [
        csvformat.header(),
        csvformat.event_row(Event(0.5, EventKind.STARTED)),
        csvformat.sample_row(sample(1.0, 100.0), GpuSample(1.0, 80.0)),
    ]
    path.write_text("".join(csvformat.format_row(r) for r in rows))
    gpu = [m for m in read_all(ReplaySource(path)) if isinstance(m, GpuSample)]
    assert gpu == [GpuSample(1.0, 80.0)] and gpu[0].per_gpu == ()


def test_header_with_a_gpus_columns_incomplete_has_no_row_for_it() -> None:
    header = [*csvformat.header([0]), "gpu1_util_pct"]
    assert csvformat.per_gpu_indexes(header) == [0]
    assert csvformat.per_gpu_indexes(list(csv.reader(io.StringIO(",".join(csvformat.header([3, 1])))))[0]) == [3, 1]


# -- end to end: gpudash --record --gpus, a real workload process on the CPU ---------------------------------
@pytest.mark.slow
def test_record_with_gpus_writes_their_columns_and_replays(machine: Machine, tmp_path: Path) -> None:
    machine(2)
    path = tmp_path / "run.csv"
    more = "--image-size 32 --steps 40 --sample-interval 0.1 --interval 0.1 --gpus 1,0 -q".split()
    code = cli.main(record_args(path, *more))  # 32 px: 40 steps in ~0.3 s (the default 64 px: ~40 s)
    assert code == 0
    cols, every_row = table(path)
    rows = samples_in(every_row)
    assert cols[csvformat.COLUMNS.index("noise") + 1 :] == per_gpu_header((1, 0))
    assert rows and set(column(rows, "gpu1_util_pct")) == {11.0} and set(column(rows, "gpu0_temp_c")) == {40.0}
    gpu = [m for m in read_all(ReplaySource(path)) if isinstance(m, GpuSample)]
    assert gpu and [r.index for r in gpu[-1].per_gpu] == [1, 0]


# -- a real machine ----------------------------------------------------------------------------------------
@pytest.mark.gpu
def test_real_nvml_reads_every_gpu_watched() -> None:
    s = NvmlSampler(0)
    info = s.open()
    try:
        assert info.available, info.unavailable
        g = sampled(s)
        assert info.sampled and [r.index for r in g.per_gpu] == list(info.sampled)
        assert all(r.answered and r.mem_total_mib for r in g.per_gpu), g.per_gpu
        if 0 in info.sampled:  # the workload's GPU: its row is its sample's values
            assert row_of(g, 0)[:2] == (g.gpu_util_pct, g.mem_used_mib)
        print(info.sampled, g.per_gpu)
    finally:
        s.stop()
