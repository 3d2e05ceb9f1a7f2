"""One NVML query per metric of a GPU, each giving ``GpuSample`` fields (``NvmlQueries``), and the
decoding they need: the throttle reasons' bits, NVML's text and UUIDs.

A query may raise: the sampler (``gpudash.host.nvml``) decides what a failure means (not
supported: dropped; gone: telemetry stops; anything else: nothing this tick). ``pynvml`` is the
module the sampler opened (or a fake one at that boundary), handed in; never imported here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from typing import Any

from gpudash.core.protocol import GpuReading

# Clock event ("throttle") reason bits (nvml.h nvmlClocksEventReason*).
THROTTLE_REASONS: tuple[tuple[int, str], ...] = (
    (0x1, "gpu_idle"),
    (0x2, "applications_clocks"),
    (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal"),
    (0x40, "hw_thermal"),
    (0x80, "hw_power_brake"),
    (0x100, "display_clocks"),
)
READING_FIELDS = tuple(f.name for f in fields(GpuReading) if f.name != "index")  # a GpuReading's figures
READING_QUERIES = ("utilization", "memory", "power", "sm_clock", "temperature")  # what a GpuReading needs

Query = Callable[[Any], dict[str, Any]]  # a GPU's handle -> the GpuSample fields it answers


def decode_throttle(mask: int) -> str:
    """Active reasons as ``"sw_power_cap|hw_slowdown"``; ``""`` when none."""
    names = [name for bit, name in THROTTLE_REASONS if mask & bit]
    known = sum(bit for bit, _ in THROTTLE_REASONS)
    if mask & ~known:
        names.append(f"other_0x{mask & ~known:x}")
    return "|".join(names)


def text(value: Any) -> str:
    """NVML's text (bytes in older nvidia-ml-py) as a string."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def norm_uuid(uuid: str) -> str:
    """A GPU's UUID as compared here: lower case, without NVML's ``GPU-``."""
    uuid = uuid.strip().lower()
    return uuid[4:] if uuid.startswith("gpu-") else uuid


class NvmlQueries:
    """The queries of one sampler over the NVML module it opened (``nvml``; None while closed).
    The energy query counts from its first answer (``energy0``; None: start again)."""

    def __init__(self) -> None:
        self.nvml: Any = None
        self.energy0: float | None = None

    def table(self) -> dict[str, Query]:
        """Every query by its metric's name, in the order a tick asks them."""
        return {
            "utilization": self.utilization,
            "memory": self.memory,
            "power": self.power,
            "sm_clock": self.sm_clock,
            "temperature": self.temperature,
            "energy": self.energy,
            "throttle": self.throttle,
            "processes": self.processes,
        }

    def const(self, name: str, default: int) -> int:
        """pynvml's constant ``name`` (``default``, nvml.h's value, where this pynvml lacks it)."""
        return int(getattr(self.nvml, name, default))

    def utilization(self, h: Any) -> dict[str, Any]:
        u = self.nvml.nvmlDeviceGetUtilizationRates(h)
        return {"gpu_util_pct": float(u.gpu), "mem_bw_util_pct": float(u.memory)}

    def memory(self, h: Any) -> dict[str, Any]:
        m = self.nvml.nvmlDeviceGetMemoryInfo(h)
        return {"mem_used_mib": m.used / 2**20, "mem_total_mib": m.total / 2**20}

    def power(self, h: Any) -> dict[str, Any]:
        return {"power_w": self.nvml.nvmlDeviceGetPowerUsage(h) / 1000.0}

    def sm_clock(self, h: Any) -> dict[str, Any]:
        return {"sm_clock_mhz": float(self.nvml.nvmlDeviceGetClockInfo(h, self.const("NVML_CLOCK_SM", 1)))}

    def temperature(self, h: Any) -> dict[str, Any]:
        t = self.nvml.nvmlDeviceGetTemperature(h, self.const("NVML_TEMPERATURE_GPU", 0))
        return {"temp_c": float(t)}

    def energy(self, h: Any) -> dict[str, Any]:
        mj = float(self.nvml.nvmlDeviceGetTotalEnergyConsumption(h))
        if self.energy0 is None:
            self.energy0 = mj
        return {"energy_j": (mj - self.energy0) / 1000.0}

    def throttle(self, h: Any) -> dict[str, Any]:
        nvml = self.nvml
        query = (
            getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
            or nvml.nvmlDeviceGetCurrentClocksThrottleReasons
        )
        return {"throttle": decode_throttle(int(query(h)))}

    def processes(self, h: Any) -> dict[str, Any]:
        """The compute processes on the GPU (their pids), for ``gpudash.host.noise``."""
        processes = self.nvml.nvmlDeviceGetComputeRunningProcesses(h)
        return {"gpu_pids": tuple(int(p.pid) for p in processes)}
