"""A machine of several GPUs, faked at the ``pynvml`` boundary: each GPU has its own readings,
which a test may change, and a test may make one GPU's every query fail (it fell off the bus)."""

from __future__ import annotations

import types
from typing import Any

from tests.test_nvml import NVMLError

GPU_IS_LOST = 15  # nvml.h NVML_ERROR_GPU_IS_LOST


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


def fake_gpus(count: int) -> types.ModuleType:
    """``pynvml`` with ``count`` GPUs named "Fake GPU i", UUID ``GPU-0000-i``, 80 GiB each.

    ``m.gpus[i]`` holds GPU i's values (``readings``); ``m.lost`` the indexes whose every
    query raises NVMLError(GPU_IS_LOST); ``m.calls[i]`` counts the queries made of GPU i."""
    m = types.ModuleType("pynvml")
    m.gpus = [readings(i) for i in range(count)]  # type: ignore[attr-defined]
    m.lost = set()  # type: ignore[attr-defined]
    m.calls = [0] * count  # type: ignore[attr-defined]
    m.NVMLError = NVMLError  # type: ignore[attr-defined]
    m.NVML_CLOCK_SM = 1  # type: ignore[attr-defined]
    m.NVML_TEMPERATURE_GPU = 0  # type: ignore[attr-defined]

    def per_gpu(read: Any) -> Any:
        def query(handle: int, *_: Any) -> Any:
            m.calls[handle] += 1  # type: ignore[attr-defined]
            if handle in m.lost:  # type: ignore[attr-defined]
                raise NVMLError(GPU_IS_LOST)
            return read(m.gpus[handle])  # type: ignore[attr-defined]

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
