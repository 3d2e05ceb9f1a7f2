"""A machine of several GPUs, faked at the ``pynvml`` boundary: each GPU has its own readings,
which a test may change, and a test may make one GPU's every query fail (it fell off the bus);
``watch_box``: the same with what ``gpudash watch`` asks besides (process lists and names, queries
that fail)."""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from typing import Any, TypeVar

import pytest

from tests.test_nvml import NVMLError

GPU_IS_LOST = 15  # nvml.h NVML_ERROR_GPU_IS_LOST
UNKNOWN_ERROR = 999  # nvml.h NVML_ERROR_UNKNOWN


def readings(i: int) -> dict[str, Any]:
    """GPU ``i``'s values until a test changes them: each GPU its own, so rows can be told apart."""
    return {
        "util": 10.0 + i,
        "mem_used_gib": 1.0 + i,
        "power_w": 100.0 + 10 * i,
        "clock": 1400.0 + 100 * i,
        "temp": 40.0 + i,
        "pids": [],  # the compute processes on it
        "throttle": 0,  # clock-event reason bits
    }


class FakeNvml(types.ModuleType):
    """``pynvml`` as ``fake_gpus`` makes it: the state a test reads and changes is typed; the
    ``nvml*`` functions are set on it as attributes."""

    gpus: list[dict[str, Any]]  # GPU i's readings
    lost: set[int]  # the GPUs whose every query raises NVMLError(GPU_IS_LOST)
    calls: list[int]  # queries made of GPU i


N = TypeVar("N", bound=FakeNvml)


def installer(monkeypatch: pytest.MonkeyPatch, make: Callable[[int], N]) -> Callable[[int], N]:
    """For a fixture: ``install(n)`` puts ``make(n)`` in place of ``pynvml`` for the test and returns
    it; CUDA_VISIBLE_DEVICES is unset, so every fake GPU is visible."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)

    def install(count: int) -> N:
        module = make(count)
        monkeypatch.setitem(sys.modules, "pynvml", module)
        return module

    return install


def fake_gpus(count: int) -> FakeNvml:
    """``pynvml`` with ``count`` GPUs named "Fake GPU i", UUID ``GPU-0000-i``, 80 GiB each.

    ``m.gpus[i]`` holds GPU i's values (``readings``); ``m.lost`` the indexes whose every
    query raises NVMLError(GPU_IS_LOST); ``m.calls[i]`` counts the queries made of GPU i."""
    return with_gpus(FakeNvml("pynvml"), count)


def with_gpus(m: N, count: int) -> N:
    """``m`` (a ``FakeNvml`` or a subclass that adds state) as ``fake_gpus(count)`` makes it."""
    m.gpus = [readings(i) for i in range(count)]
    m.lost = set()
    m.calls = [0] * count
    m.NVMLError = NVMLError  # type: ignore[attr-defined]
    m.NVML_CLOCK_SM = 1  # type: ignore[attr-defined]
    m.NVML_TEMPERATURE_GPU = 0  # type: ignore[attr-defined]

    def per_gpu(read: Any) -> Any:
        def query(handle: int, *_: Any) -> Any:
            m.calls[handle] += 1
            if handle in m.lost:
                raise NVMLError(GPU_IS_LOST)
            return read(m.gpus[handle])

        return query

    m.nvmlInit = lambda: None  # type: ignore[attr-defined]
    m.nvmlShutdown = lambda: None  # type: ignore[attr-defined]
    m.nvmlDeviceGetCount = lambda: count  # type: ignore[attr-defined]
    m.nvmlDeviceGetHandleByIndex = lambda i: i  # type: ignore[attr-defined]
    m.nvmlDeviceGetName = lambda h: f"Fake GPU {h}".encode()  # type: ignore[attr-defined]
    m.nvmlDeviceGetUUID = lambda h: f"GPU-0000-{h}"  # type: ignore[attr-defined]
    m.nvmlSystemGetDriverVersion = lambda: "555.42"  # type: ignore[attr-defined]
    m.nvmlDeviceGetUtilizationRates = per_gpu(  # type: ignore[attr-defined]
        lambda g: types.SimpleNamespace(gpu=g["util"], memory=g["util"] / 2)
    )
    m.nvmlDeviceGetMemoryInfo = per_gpu(  # type: ignore[attr-defined]
        lambda g: types.SimpleNamespace(used=int(g["mem_used_gib"] * 2**30), total=80 * 2**30)
    )
    m.nvmlDeviceGetPowerUsage = per_gpu(lambda g: g["power_w"] * 1000)  # type: ignore[attr-defined]
    m.nvmlDeviceGetClockInfo = per_gpu(lambda g: g["clock"])  # type: ignore[attr-defined]
    m.nvmlDeviceGetTemperature = per_gpu(lambda g: g["temp"])  # type: ignore[attr-defined]
    m.nvmlDeviceGetTotalEnergyConsumption = per_gpu(lambda g: 1_000_000.0)  # type: ignore[attr-defined]
    m.nvmlDeviceGetCurrentClocksEventReasons = per_gpu(lambda g: g["throttle"])  # type: ignore[attr-defined]
    m.nvmlDeviceGetComputeRunningProcesses = per_gpu(  # type: ignore[attr-defined]
        lambda g: [types.SimpleNamespace(pid=pid, usedGpuMemory=2**30) for pid in g["pids"]]
    )
    return m


class WatchBox(FakeNvml):
    """``pynvml`` as ``watch_box`` makes it: ``FakeNvml`` and what watch asks besides."""

    compute: list[dict[int, float | None]]  # GPU i's compute processes: {pid: MiB}
    graphics: list[dict[int, float | None]]
    names: dict[int, str]  # NVML's process names
    failing: set[tuple[str, int]]  # (query name, GPU index) pairs that raise


def watch_box(count: int) -> WatchBox:
    """``fake_gpus(count)`` with what watch asks besides: graphics processes, each process's GPU
    memory, NVML's process names, and queries a test can make fail.

    ``m.compute[i]`` / ``m.graphics[i]``: GPU i's processes as {pid: MiB}; ``m.names``: NVML's
    name by pid (a pid without one raises NotFound, as for a process NVML cannot name);
    ``m.failing``: (query name, GPU index) pairs that raise NVMLError(999)."""
    m = with_gpus(WatchBox("pynvml"), count)
    m.compute = [{} for _ in range(count)]
    m.graphics = [{} for _ in range(count)]
    m.names = {}
    m.failing = set()

    def failable(name: str, query: Any) -> Any:
        def call(handle: int, *args: Any) -> Any:
            if (name, handle) in m.failing:
                raise NVMLError(UNKNOWN_ERROR)
            return query(handle, *args)

        return call

    for name in (
        "nvmlDeviceGetUtilizationRates",
        "nvmlDeviceGetMemoryInfo",
        "nvmlDeviceGetPowerUsage",
        "nvmlDeviceGetClockInfo",
        "nvmlDeviceGetTemperature",
        "nvmlDeviceGetCurrentClocksEventReasons",
    ):
        setattr(m, name, failable(name, getattr(m, name)))

    def listing(table: str) -> Any:
        return lambda h: [
            types.SimpleNamespace(pid=pid, usedGpuMemory=None if mib is None else int(mib * 2**20))
            for pid, mib in getattr(m, table)[h].items()
        ]

    m.nvmlDeviceGetComputeRunningProcesses = failable("compute", listing("compute"))  # type: ignore[attr-defined]
    m.nvmlDeviceGetGraphicsRunningProcesses = failable("graphics", listing("graphics"))  # type: ignore[attr-defined]

    def process_name(pid: int) -> str:
        if pid not in m.names:
            raise NVMLError(6)  # NVML_ERROR_NOT_FOUND
        return m.names[pid]

    m.nvmlSystemGetProcessName = process_name  # type: ignore[attr-defined]
    return m
