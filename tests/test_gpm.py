"""GPM (SM, tensor and DRAM activity) in the NVML sampler's ticks, with NVML faked at the ``pynvml``
boundary (``tests/fake_gpm.py`` on a ``tests/fake_gpus.py`` box): figures from the two samples of
each tick, one GPU and one metric at a time going empty, the reason said once, MIG instances, and
the buffers freed. The real GPU's figures against a direct GPM read: ``tests/test_gpm_gpu.py``."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from gpudash.core.protocol import GpuSample
from gpudash.host.gpm import WHAT
from gpudash.host.nvml import NvmlSampler
from gpudash.host.nvml_watch import gpm_window, read_gpu
from tests.fake_gpm import FakeGpm, add_gpm
from tests.fake_gpus import FakeNvml, fake_gpus, installer
from tests.messages import present

Box = Callable[[int], FakeNvml]
TRIO = ("sm_active_pct", "tensor_active_pct", "dram_active_pct")


@pytest.fixture
def box(monkeypatch: pytest.MonkeyPatch) -> Box:
    """``box(n)``: n fake GPUs behind ``pynvml`` (no GPM until ``add_gpm``); CUDA_VISIBLE_DEVICES unset."""
    return installer(monkeypatch, fake_gpus)


def hopper(box: Box, count: int = 1) -> tuple[FakeNvml, FakeGpm]:
    m = box(count)
    return m, add_gpm(m)


def opened(index: int = 0, gpus: tuple[int, ...] | None = None, gpm: bool = True) -> NvmlSampler:
    s = NvmlSampler(index, gpus=gpus, gpm=gpm)
    assert s.open().available, s.info.unavailable
    return s


def tick(s: NvmlSampler) -> GpuSample:
    return present(s.sample(), "a GPU sample")


def trio(x: object) -> tuple[float | None, ...]:
    return tuple(getattr(x, k) for k in TRIO)


# -- figures -------------------------------------------------------------------------------------------
def test_a_ticks_figures_are_the_activity_since_the_tick_before(box: Box) -> None:
    _, g = hopper(box)
    g.auto_s = 0.0  # the GPU's clock moves only with run()
    s = opened(gpus=(0,))
    g.run(0, 1.0)
    first = tick(s)
    assert trio(first) == (None, None, None) and first.sm_occupancy_pct is None  # one sample: nothing yet
    assert s.info.gpm_unavailable is None
    g.run(0, 1.0, sm_active_pct=80, tensor_active_pct=50, dram_active_pct=30, pcie_rx_mib_s=1000, nvlink_tx_mib_s=7)
    second = tick(s)
    assert trio(second) == pytest.approx((80, 50, 30))
    assert (second.pcie_rx_mib_s, second.nvlink_tx_mib_s, second.pcie_tx_mib_s) == pytest.approx((1000, 7, 0))
    assert trio(second.per_gpu[0]) == trio(second)  # the CSV's per-GPU columns
    g.run(0, 3.0, sm_active_pct=20, tensor_active_pct=10, dram_active_pct=90)
    third = tick(s)
    # these 3 s only: not since the first sample (35), not the tick before's again (80)
    assert trio(third) == pytest.approx((20, 10, 90))
    assert g.calls["nvmlGpmSampleGet"] == 3 and g.calls["nvmlGpmMetricsGet"] == 2 and set(g.versions) == {1}
    assert g.calls["nvmlGpmSampleAlloc"] == 2  # two buffers, swapped tick after tick


def test_every_gpu_watched_has_its_own_figures_one_sample_each_per_tick(box: Box) -> None:
    _, g = hopper(box, 3)
    s = opened(1)  # the workload on GPU 1; all three watched
    tick(s)
    last = tick(s)
    assert trio(last) == pytest.approx((61, 41, 21))  # GPU 1's (fake_gpm.steady_rates)
    assert [(r.index, *trio(r)) for r in last.per_gpu] == [(0, 60, 40, 20), (1, 61, 41, 21), (2, 62, 42, 22)]
    assert last.per_gpu[2].gpu_util_pct == 12.0 and last.mig == ()
    assert g.calls["nvmlGpmSampleGet"] == 6 and g.calls["nvmlGpmMetricsGet"] == 3


def test_the_charted_gpu_moves_and_its_figures_follow(box: Box) -> None:
    _, g = hopper(box, 3)
    s = opened(0, gpus=(0,))  # GPU 2 not watched: its GPM is read once it is charted
    tick(s)
    assert s.select(index=2)
    tick(s)  # GPU 2's first sample
    assert trio(tick(s)) == pytest.approx((62, 42, 22)) and s.info.gpm_unavailable is None


def test_one_metric_failing_leaves_only_it_empty(box: Box) -> None:
    _, g = hopper(box)
    g.metric_errors[5] = 3  # any-tensor: Not Supported in this tick's answer
    s = opened(gpus=(0,))
    tick(s)
    got = tick(s)
    assert got.tensor_active_pct is None and got.per_gpu[0].tensor_active_pct is None
    assert (got.sm_active_pct, got.dram_active_pct, got.hmma_active_pct) == pytest.approx((60, 20, 35))
    del g.metric_errors[5]
    assert tick(s).tensor_active_pct == pytest.approx(40)  # a metric's error is that tick's only
    assert s.info.gpm_unavailable is None


def test_a_failing_sample_is_empty_for_that_tick_and_the_next_pairs_across_it(box: Box) -> None:
    _, g = hopper(box)
    g.auto_s = 0.0
    s = opened(gpus=(0,))
    g.run(0, 1.0)
    tick(s)
    g.run(0, 1.0, sm_active_pct=100)
    g.errors[("nvmlGpmSampleGet", 0)] = 999  # NVML_ERROR_UNKNOWN, once
    failed = tick(s)
    del g.errors[("nvmlGpmSampleGet", 0)]
    g.run(0, 1.0, sm_active_pct=50)
    after = tick(s)
    assert failed.sm_active_pct is None and failed.gpu_util_pct == 10.0
    assert after.sm_active_pct == pytest.approx(75)  # from the last good sample: both seconds
    assert s.info.gpm_unavailable is None


# -- no GPM: empty, and why, once ----------------------------------------------------------------------
def older_gpu(g: FakeGpm) -> None:
    g.unsupported.add(0)


def vgpu(g: FakeGpm) -> None:
    g.vgpu.add(0)


def refused(g: FakeGpm) -> None:
    g.errors[("nvmlGpmQueryDeviceSupport", 0)] = 4  # NVML_ERROR_NO_PERMISSION


def refused_at_sampling(g: FakeGpm) -> None:
    g.errors[("nvmlGpmSampleGet", 0)] = 4


def old_driver(g: FakeGpm) -> None:
    g.errors[("nvmlGpmQueryDeviceSupport", 0)] = 13  # NVML_ERROR_FUNCTION_NOT_FOUND


@pytest.mark.parametrize(
    ("setup", "says"),
    [
        (older_gpu, f"{WHAT} needs a Hopper or newer GPU: Fake GPU 0 has none"),
        (vgpu, f"{WHAT} is not available on a vGPU (Fake GPU 0)"),
        (refused, f"{WHAT} was refused on Fake GPU 0: no permission"),
        (refused_at_sampling, f"{WHAT} was refused on GPU 0: no permission"),
        (old_driver, f"{WHAT} needs a newer NVIDIA driver"),
        (None, f"{WHAT} needs a newer nvidia-ml-py: this pynvml has no GPM functions"),
    ],
)
def test_without_gpm_its_figures_are_empty_the_rest_flows_and_why_is_one_line(
    box: Box, setup: Callable[[FakeGpm], None] | None, says: str
) -> None:
    m = box(1)
    g = add_gpm(m) if setup is not None else None
    if g is not None and setup is not None:
        setup(g)
    s = opened(gpus=(0,))
    got = [tick(s) for _ in range(4)]
    assert all(trio(x) == (None, None, None) and trio(x.per_gpu[0]) == (None, None, None) for x in got)
    assert all((x.gpu_util_pct, x.power_w, x.temp_c) == (10.0, 100.0, 40.0) for x in got)
    reason = present(s.info.gpm_unavailable)
    assert reason.startswith(says) and "\n" not in reason and s.info.available
    assert g is None or g.calls["nvmlGpmSampleGet"] <= 1  # found out once, not asked every tick
    assert g is None or g.allocated == set()  # a GPU refused mid-run: its buffers freed at once
    assert s.drain() == got  # said in the info, not as a stream of errors


def test_gpm_off_asks_nothing_and_says_so(box: Box) -> None:
    _, g = hopper(box)
    s = opened(gpus=(0,), gpm=False)
    assert trio(tick(s)) == trio(tick(s)) == (None, None, None)
    assert sum(g.calls.values()) == 0 and present(s.info.gpm_unavailable) == f"{WHAT} is off (sampling without it)"


def test_a_mixed_box_names_the_gpu_without_gpm_and_reads_the_others(box: Box) -> None:
    _, g = hopper(box, 2)
    g.unsupported.add(1)
    s = opened(0)
    tick(s)
    last = tick(s)
    assert trio(last.per_gpu[0]) == pytest.approx((60, 40, 20)) and trio(last.per_gpu[1]) == (None, None, None)
    assert s.info.gpm_unavailable == f"{WHAT}: GPU 1 needs a Hopper or newer GPU: Fake GPU 1 has none"


def test_a_gpu_lost_mid_run_loses_its_gpm_and_everything_else_flows(box: Box) -> None:
    m, g = hopper(box, 2)
    s = opened(0)
    tick(s)
    assert trio(tick(s).per_gpu[1]) == pytest.approx((61, 41, 21))
    m.lost.add(1)  # GPU 1 fell off the bus
    after = [tick(s) for _ in range(3)]
    for x in after:
        assert trio(x) == pytest.approx((60, 40, 20)) and x.gpu_util_pct == 10.0  # the workload's GPU goes on
        assert not x.per_gpu[1].answered  # the lost GPU's row: n/a, GPM included
    reason = present(s.info.gpm_unavailable)
    assert reason.startswith(f"{WHAT}: GPU 1 stopped: the GPU no longer answers") and s.info.available
    assert len(g.allocated) == 2  # GPU 1's buffers freed; GPU 0's in use
    gets = g.calls["nvmlGpmSampleGet"]
    tick(s)
    assert g.calls["nvmlGpmSampleGet"] == gets + 1  # the lost GPU is not asked again


# -- MIG -------------------------------------------------------------------------------------------------
def test_under_mig_each_gpu_instance_is_read_and_labelled(box: Box) -> None:
    _, g = hopper(box)
    g.mig[0] = {1: "MIG-aaaa", 2: "MIG-bbbb"}
    s = opened(0)
    tick(s)
    last = tick(s)
    assert [(r.label, *trio(r)) for r in last.mig] == [("GPU 0 · GI 1", 70, 50, 30), ("GPU 0 · GI 2", 80, 60, 40)]
    assert trio(last) == (None, None, None)  # which instance is the workload's: not known
    reason = present(s.info.gpm_unavailable)
    assert "MIG GPU instance" in reason and "CUDA_VISIBLE_DEVICES" in reason
    assert g.calls["nvmlGpmMigSampleGet"] == 4 and g.calls["nvmlGpmSampleGet"] == 0


@pytest.mark.parametrize("visible", ["MIG-bbbb", "MIG-GPU-0000-0/2/0"])
def test_under_mig_the_workloads_instance_is_the_whole_gpus_figures(
    box: Box, monkeypatch: pytest.MonkeyPatch, visible: str
) -> None:
    _, g = hopper(box)
    g.mig[0] = {1: "MIG-aaaa", 2: "MIG-bbbb"}
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    s = opened(0)
    tick(s)
    last = tick(s)
    assert trio(last) == pytest.approx((80, 60, 40)) and len(last.mig) == 2  # GI 2's
    assert s.info.gpm_unavailable is None


# -- the end ---------------------------------------------------------------------------------------------
def test_every_buffer_is_freed_at_stop_before_nvml_shuts_down(box: Box) -> None:
    m, g = hopper(box, 2)
    g.mig[1] = {3: "MIG-cccc"}
    at_shutdown: list[set[int]] = []
    m.nvmlShutdown = lambda: at_shutdown.append(set(g.allocated))  # type: ignore[attr-defined]
    s = opened(0)
    s.start()  # a first tick, then the thread
    tick(s)
    s.stop()
    assert g.calls["nvmlGpmSampleAlloc"] == 4 and len(g.freed) == 4  # GPU 0's pair, GPU 1 GI 3's
    assert at_shutdown == [set()]
    assert s.sample() is None and g.allocated == set()
    s.stop()  # idempotent: nothing freed twice (the fake raises on that)
    assert len(g.freed) == 4


def test_once_a_window_gives_the_figures_without_ticks(box: Box) -> None:
    _, g = hopper(box, 2)
    s = opened(0)
    gpm_window(s, 0.01)
    values, failed = read_gpu(s, 1)
    assert (values["sm_active_pct"], values["tensor_active_pct"], values["dram_active_pct"]) == pytest.approx(
        (61, 41, 21)
    )
    assert values["gpu_util_pct"] == 11.0 and failed == {}
    s.stop()
    assert g.allocated == set()
