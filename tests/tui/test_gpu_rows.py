"""The dashboard's per-GPU rows (Pilot): the real NVML sampler over a fake ``pynvml`` of 1, 2, 4
and 8 GPUs feeds a scripted workload source; and a replay of a multi-GPU recording."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from gpudash.core.protocol import EngineSource, GpuSample, Message, RunConfig, Sample
from gpudash.host.nvml import NvmlSampler
from gpudash.recording import csvformat
from gpudash.recording.metadata import run_metadata
from gpudash.recording.record import CsvRecorder
from gpudash.recording.replay import ReplaySource, read_all
from gpudash.tui.app import GpuDashApp
from gpudash.tui.charts import MetricChart
from gpudash.tui.gpu_rows import GpuRows
from gpudash.tui.widgets import plain_text
from tests.fake_gpus import fake_gpus
from tests.messages import present

from .conftest import wait_until
from .dashboard import DashPilot
from .fakes import FakeSource, run_segment, started


class SampledSource(FakeSource):
    """The scripted workload of ``FakeSource``, with GPU samples from a real ``NvmlSampler``
    (over the fake ``pynvml``) that the test ticks with ``tick()``."""

    def __init__(self, sampler: NvmlSampler) -> None:
        super().__init__(gpu_info=sampler.info)
        self.sampler = sampler

    def poll(self) -> list[Message]:
        return super().poll() + self.sampler.drain()

    def tick(self) -> None:
        self.sampler.sample()


Box = Callable[..., tuple[ModuleType, SampledSource]]  # box(count, workload_gpu=0, gpus=None)


@pytest.fixture
def box(monkeypatch: pytest.MonkeyPatch) -> Box:
    """``box(n, workload_gpu, gpus)``: (fake pynvml of n GPUs, a source sampling them)."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)

    def make(
        count: int, workload_gpu: int = 0, gpus: tuple[int, ...] | None = None
    ) -> tuple[ModuleType, SampledSource]:
        nv = fake_gpus(count)
        monkeypatch.setitem(sys.modules, "pynvml", nv)
        sampler = NvmlSampler(workload_gpu, gpus=gpus)
        assert sampler.open().available
        return nv, SampledSource(sampler)

    return make


def workload_samples(t0: float, t1: float) -> list[Message]:
    return [m for m in run_segment(t0, t1, 100.0) if isinstance(m, Sample)]


async def running(app: GpuDashApp, pilot: DashPilot, src: SampledSource) -> None:
    await wait_until(pilot, lambda: app.source_ready, "the source to start")
    src.push(started(), *workload_samples(1.0, 4.0))
    src.tick()
    app.refresh_now()
    await pilot.pause()


def rows(app: GpuDashApp) -> list[str]:
    widget = app.query_one(GpuRows)
    return plain_text(widget, widget.size.width).rstrip("\n").split("\n") if widget.display else []


def make_app(src: EngineSource) -> GpuDashApp:
    return GpuDashApp(src, clock=lambda: 0.0, toasts=False)


@pytest.mark.parametrize("count", [2, 4])
async def test_one_row_per_gpu_with_the_workloads_highlighted(box: Box, count: int) -> None:
    nv, src = box(count, workload_gpu=1)
    app = make_app(src)
    async with app.run_test(size=(120, 40)) as pilot:
        await running(app, pilot, src)
        shown = rows(app)
        assert len(shown) == count
        for i, line in enumerate(shown):
            assert line.lstrip("▶ ").startswith(f"GPU {i}")
            assert f"{10 + i}%" in line and f"{1400 + 100 * i} MHz" in line and f"{40 + i}°C" in line
            assert f"{1 + i:.1f}/80 GiB" in line and f"{100 + 10 * i} W" in line
        assert [line.startswith("▶") for line in shown] == [i == 1 for i in range(count)]


async def test_a_gpu_that_stops_answering_reads_na_while_the_others_update(box: Box) -> None:
    nv, src = box(4)
    app = make_app(src)
    async with app.run_test(size=(120, 40)) as pilot:
        await running(app, pilot, src)
        assert "n/a" not in " ".join(rows(app))
        nv.lost.add(2)
        nv.gpus[1]["util"] = 77.0
        nv.gpus[3]["temp"] = 66.0
        src.push(*workload_samples(4.0, 5.0))
        src.tick()
        app.refresh_now()
        await pilot.pause()
        shown = rows(app)
        assert "n/a" in shown[2] and "%" not in shown[2]
        assert "77%" in shown[1] and "66°C" in shown[3] and "10%" in shown[0]
        assert app.state.status == "running" and app.query_one("#chart-gpu_util", MetricChart).display


async def test_a_one_gpu_box_has_no_rows_its_gpu_is_in_the_header(box: Box) -> None:
    _, src = box(1)
    app = make_app(src)
    async with app.run_test(size=(120, 40)) as pilot:
        await running(app, pilot, src)
        assert rows(app) == [] and present(app.state.last_gpu).per_gpu  # sampled, but nothing beyond the header's


async def test_eight_gpus_on_a_short_terminal_share_lines_and_leave_the_charts_room(box: Box) -> None:
    _, src = box(8, workload_gpu=5)
    app = make_app(src)
    async with app.run_test(size=(80, 24)) as pilot:
        await running(app, pilot, src)
        shown = rows(app)
        assert len(shown) == 4 and all(line.count("MHz") == 2 for line in shown)
        assert "▶5 " in shown[2] and "15%" in shown[2]
        assert all(c.size.height >= 6 for c in app.visible_charts)


async def test_replay_of_a_multi_gpu_recording_shows_its_rows(box: Box, tmp_path: Path) -> None:
    nv, live = box(4, workload_gpu=0, gpus=(3, 0, 1))
    path = tmp_path / "run.csv"
    rec = CsvRecorder(path, run_metadata(RunConfig(), live.sampler.info))
    rec.on_message(started())
    nv.lost.add(1)
    for m in workload_samples(1.0, 3.0):
        live.tick()
        for g in live.sampler.drain():
            rec.on_message(g)
        rec.on_message(m)
    rec.close()
    app = make_app(ReplaySource(path))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: app.source_ready and not app.controller.source.alive, "the replay to load")
        app.refresh_now()
        await pilot.pause()
        shown = rows(app)
        assert [line.lstrip("▶ ")[:5] for line in shown] == ["GPU 3", "GPU 0", "GPU 1"]
        assert "13%" in shown[0] and "4.0 GiB" in shown[0]  # a recording keeps the memory used, not the total
        assert shown[1].startswith("▶") and "n/a" in shown[2]


async def test_recording_from_the_dashboard_has_the_per_gpu_columns(box: Box, tmp_path: Path) -> None:
    nv, src = box(2, workload_gpu=1)
    app = make_app(src)
    path = tmp_path / "mid-run.csv"
    async with app.run_test(size=(120, 40)) as pilot:
        await running(app, pilot, src)
        app.controller.recording.start(str(path))  # what c and a typed name do
        nv.gpus[0]["power_w"] = 222.0
        src.tick()
        app.refresh_now()
        src.push(*workload_samples(4.0, 5.0))  # each sample row joins the newest NVML sample
        app.refresh_now()
        app.controller.recording.stop()
    header = path.read_text().splitlines()[0].split(",")
    suffixes = ("util_pct", "mem_used_mib", "power_w", "sm_clock_mhz", "temp_c")
    gpm = ("sm_active_pct", "tensor_active_pct", "dram_active_pct")  # empty: the fake GPUs have no GPM
    nvml_end = header.index("noise") + 1 + 10  # NVML's per-GPU columns follow the noise column
    assert header[nvml_end - 10 : nvml_end] == [f"gpu{i}_{c}" for i in (0, 1) for c in suffixes]
    gpm_end = header.index("train_s")  # GPM's come last but for a job's training seconds and a rank row's own
    assert header[gpm_end - 6 : gpm_end + 1] == [*(f"gpu{i}_{c}" for i in (0, 1) for c in gpm), "train_s"]
    rank_row = ["rank", "node", "input_wait_pct", "allreduce_exposed_ms", "own_ms", "comm_ms"]
    assert header[gpm_end + 1 :] == [*rank_row, *csvformat.MEMORY_COLUMNS, csvformat.EVENT_DATA_COLUMN]
    gpu = [m for m in read_all(ReplaySource(path)) if isinstance(m, GpuSample)]
    assert gpu and gpu[-1].per_gpu[0].power_w == 222.0 and gpu[-1].per_gpu[1].power_w == 110.0


def test_a_data_parallel_run_highlights_every_ranks_gpu() -> None:
    from gpudash.core.protocol import GpuInfo, GpuReading
    from gpudash.tui.gpu_rows import workload_gpus

    # CUDA_VISIBLE_DEVICES=2,0,1: rank r runs on cuda:r, the r-th GPU sampled
    readings = tuple(GpuReading(i) for i in (2, 0, 1))
    info = GpuInfo(available=True, names=("a", "b", "c"), index=2)
    assert workload_gpus(info, readings, ranks=2) == {2, 0}
    assert workload_gpus(info, readings) == {2}  # one process: its own GPU only
