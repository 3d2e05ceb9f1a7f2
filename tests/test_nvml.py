"""NVML sampler, with NVML faked at the ``pynvml`` boundary (and the real one on a GPU)."""

from __future__ import annotations

import sys
import time
import types
from collections import Counter
from collections.abc import Collection
from typing import Any, Protocol, TypeVar

import pytest

from gpudash.host.devices import cuda_index_hint
from gpudash.host.nvml import NvmlSampler
from gpudash.host.nvml_queries import decode_throttle
from tests.messages import gpu_samples_of, present

M = TypeVar("M", bound="types.ModuleType | None")


class NVMLError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.value = value

    def __str__(self) -> str:
        return {3: "Not Supported", 12: "NVML Shared Library Not Found", 9: "Driver Not Loaded"}.get(
            self.value, "Unknown Error"
        )


class NVMLError_NotSupported(NVMLError):
    def __init__(self) -> None:
        super().__init__(3)


class NVMLError_LibraryNotFound(NVMLError):
    def __init__(self) -> None:
        super().__init__(12)


class NVMLError_Unknown(NVMLError):
    def __init__(self) -> None:
        super().__init__(999)


class FakePynvml(types.ModuleType):
    """``pynvml`` as the sampler uses it: its errors and constants, and the calls made, counted."""

    NVMLError = NVMLError
    NVMLError_NotSupported = NVMLError_NotSupported
    NVMLError_LibraryNotFound = NVMLError_LibraryNotFound
    NVML_CLOCK_SM = 1
    NVML_TEMPERATURE_GPU = 0

    def __init__(self) -> None:
        super().__init__("pynvml")
        self.calls: Counter[str] = Counter()
        self.energy_mj = 1_000_000.0


def fake_pynvml(
    *,
    init_error: BaseException | None = None,
    unsupported: Collection[str] = (),
    fail_once: Collection[str] = (),
    count: int = 2,
) -> FakePynvml:
    """A stand-in for ``pynvml`` that counts calls per function."""
    m = FakePynvml()
    failed: set[str] = set()

    def fn(name: str, result: Any) -> None:
        def call(*args: Any) -> Any:
            m.calls[name] += 1
            if name in unsupported:
                raise NVMLError_NotSupported()
            if name in fail_once and name not in failed:
                failed.add(name)
                raise NVMLError_Unknown()
            return result(*args) if callable(result) else result

        setattr(m, name, call)

    def init() -> None:
        if init_error is not None:
            raise init_error

    fn("nvmlInit", lambda: init())
    fn("nvmlShutdown", None)
    fn("nvmlDeviceGetCount", count)
    fn("nvmlDeviceGetHandleByIndex", lambda i: f"h{i}")
    fn("nvmlDeviceGetName", lambda h: f"Fake GPU {h[1:]}".encode())
    fn("nvmlDeviceGetUUID", lambda h: f"GPU-0000-{h[1:]}")
    fn("nvmlSystemGetDriverVersion", "555.42")
    fn("nvmlDeviceGetUtilizationRates", types.SimpleNamespace(gpu=87, memory=40))
    fn("nvmlDeviceGetMemoryInfo", types.SimpleNamespace(used=3 * 2**30, total=80 * 2**30))
    fn("nvmlDeviceGetPowerUsage", 250_000)
    fn("nvmlDeviceGetClockInfo", lambda h, kind: 1980)
    fn("nvmlDeviceGetTemperature", lambda h, kind: 61)

    def energy(h: str) -> float:
        m.energy_mj += 5000.0
        return m.energy_mj

    fn("nvmlDeviceGetTotalEnergyConsumption", energy)
    fn("nvmlDeviceGetCurrentClocksEventReasons", 0x4 | 0x8)
    fn("nvmlDeviceGetComputeRunningProcesses", lambda h: [types.SimpleNamespace(pid=4242, usedGpuMemory=2**30)])
    return m


class Install(Protocol):
    """Puts a fake ``pynvml`` (None: none at all) where ``import pynvml`` finds it; returns it."""

    def __call__(self, module: M) -> M: ...


@pytest.fixture
def install(monkeypatch: pytest.MonkeyPatch) -> Install:
    def _install(module: M) -> M:
        monkeypatch.setitem(sys.modules, "pynvml", module)  # None makes `import pynvml` fail
        return module

    return _install


def test_all_metrics(install: Install) -> None:
    nv = install(fake_pynvml())
    s = NvmlSampler(1, 0.5)
    info = s.open()
    assert info.available and info.unavailable is None
    assert info.names == ("Fake GPU 0", "Fake GPU 1") and info.index == 1 and info.name == "Fake GPU 1"
    assert info.driver == "555.42"
    a, b = s.sample(), s.sample()
    assert a is not None and b is not None
    assert (b.gpu_util_pct, b.mem_bw_util_pct, b.power_w, b.sm_clock_mhz, b.temp_c) == (87, 40, 250.0, 1980, 61)
    assert b.mem_used_mib == 3 * 1024 and b.mem_total_mib == 80 * 1024
    assert a.energy_j == 0.0 and b.energy_j == pytest.approx(5.0)  # joules since the sampler started
    assert b.throttle == "sw_power_cap|hw_slowdown"
    assert b.gpu_pids == (4242,)  # the compute processes on it: what makes a GPU shared
    assert s.drain() == [a, b] and s.drain() == [] and s.latest is b
    s.stop()
    assert nv.calls["nvmlShutdown"] == 1


def test_library_missing(install: Install) -> None:
    install(None)
    info = NvmlSampler().start()
    assert not info.available and "nvidia-ml-py" in present(info.unavailable)


@pytest.mark.parametrize(
    ("error", "reason"), [(NVMLError_LibraryNotFound(), "no NVIDIA driver"), (NVMLError(9), "driver is not loaded")]
)
def test_nvml_unusable(install: Install, error: BaseException, reason: str) -> None:
    install(fake_pynvml(init_error=error))
    s = NvmlSampler()
    info = s.start()
    assert not info.available and reason in present(info.unavailable)
    assert s.sample() is None and s.drain() == []
    s.stop()


def test_no_gpu(install: Install) -> None:
    install(fake_pynvml(count=0))
    info = NvmlSampler().open()
    assert not info.available and "no NVIDIA GPU" in present(info.unavailable)


def test_unsupported_metric_is_probed_once_and_dropped(install: Install) -> None:
    nv = install(fake_pynvml(unsupported={"nvmlDeviceGetTotalEnergyConsumption"}))
    s = NvmlSampler()
    s.open()
    got = [present(s.sample()) for _ in range(5)]
    assert nv.calls["nvmlDeviceGetTotalEnergyConsumption"] == 1
    assert all(g.energy_j is None for g in got)
    assert all(g.power_w == 250.0 for g in got)  # the rest goes on
    assert "energy" in s.dropped


def test_one_call_failing_is_none_for_that_tick_only(install: Install) -> None:
    nv = install(fake_pynvml(fail_once={"nvmlDeviceGetPowerUsage"}))
    s = NvmlSampler(gpus=(0,))  # the workload's GPU only: one power query per tick
    s.open()
    first, second = present(s.sample()), present(s.sample())
    assert first.power_w is None and first.gpu_util_pct == 87
    assert second.power_w == 250.0
    assert nv.calls["nvmlDeviceGetPowerUsage"] == 2 and not s.dropped


def test_thread_ticks_and_stops(install: Install) -> None:
    install(fake_pynvml())
    s = NvmlSampler(0, 0.02)
    s.start()
    deadline = time.monotonic() + 10
    got: list[Any] = []
    while len(got) < 3 and time.monotonic() < deadline:
        got += s.drain()
        time.sleep(0.01)
    s.stop()
    assert len(got) >= 3 and all(b.time_s > a.time_s for a, b in zip(got, got[1:], strict=False))
    s.stop()  # idempotent


def test_select_by_uuid(install: Install) -> None:
    install(fake_pynvml())
    s = NvmlSampler(0)
    s.open()
    assert s.select(uuid="0000-1") and s.info.index == 1
    assert not s.select(uuid="nope") and s.info.index == 1
    assert s.index_of("GPU-0000-1") == 1 and s.index_of("nope") is None and s.index_of("") is None  # a rank's GPU


def test_decode_throttle_and_index_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    assert decode_throttle(0) == ""
    assert decode_throttle(0x1 | 0x40) == "gpu_idle|hw_thermal"
    assert decode_throttle(0x10000) == "other_0x10000"
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert cuda_index_hint("cuda:1") == 1 and cuda_index_hint("auto") == 0
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,2")
    assert cuda_index_hint("cuda:1") == 2


@pytest.mark.gpu
def test_real_nvml() -> None:
    s = NvmlSampler(0, 0.1)
    info = s.start()
    try:
        assert info.available, info.unavailable
        assert info.names and info.driver
        time.sleep(0.5)
        got = gpu_samples_of(s.drain())
        assert len(got) >= 2
        last = got[-1]
        assert last.gpu_util_pct is not None and last.mem_total_mib and last.mem_total_mib > 0
        assert last.power_w is None or last.power_w > 0
        assert last.throttle is not None
        print(info, last, s.dropped)
    finally:
        s.stop()
