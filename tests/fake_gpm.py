"""NVML's GPM (GPU performance monitoring), faked at the ``pynvml`` boundary on a ``fake_gpus`` box.

``add_gpm(m)`` gives the fake ``pynvml`` module ``m`` the GPM functions and returns the ``FakeGpm``
that drives them. Each source (a GPU, or a MIG GPU instance ``(gpu, gi)``) has a clock and
counters; ``run(source, seconds, **rates)`` advances them (a rate in the metric's unit: % or MiB/s)
and every ``nvmlGpmSampleGet`` first advances its GPU by ``auto_s`` at its ``steady`` rates (0: not).
``nvmlGpmMetricsGet`` gives each metric Δcounter/Δtime between its two samples, as GPM does, and
refuses (Invalid Argument) samples of different sources or in the wrong order: a figure tells
which two samples were paired. A test may make a GPU unsupported (an older architecture, a vGPU),
make a GPM call raise an NVML error for a GPU, make one metric answer with an error, put a GPU
in MIG mode with GPU instances, or lose a GPU (``m.lost``); ``allocated`` holds the live buffers.
"""

from __future__ import annotations

import types
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from gpudash.host.gpm import METRICS
from tests.fake_gpus import GPU_IS_LOST, FakeNvml
from tests.test_nvml import NVMLError

INVALID_ARGUMENT, NOT_SUPPORTED, NO_PERMISSION, NOT_FOUND = 2, 3, 4, 6
HOPPER, AMPERE = 9, 7
KEY_OF = {metric_id: key for key, _, metric_id in METRICS}
Source = int | tuple[int, int]  # a GPU, or (GPU, GPU instance id)


@dataclass
class Buffer:
    """A GPM sample buffer: what its last ``nvmlGpmSampleGet`` took (None: nothing yet)."""

    id: int
    source: Source | None = None
    time_s: float = 0.0
    counters: dict[str, float] = field(default_factory=dict)


def steady_rates(source: Source) -> dict[str, float]:
    """A source's default activity: each its own figures, so a test can tell them apart."""
    i = source if isinstance(source, int) else 10 * source[1] + source[0]
    return {
        "sm_active_pct": 60.0 + i,
        "sm_occupancy_pct": 30.0 + i,
        "tensor_active_pct": 40.0 + i,
        "hmma_active_pct": 35.0 + i,
        "dfma_active_pct": 0.0,
        "dram_active_pct": 20.0 + i,
        "pcie_tx_mib_s": 100.0 + i,
        "pcie_rx_mib_s": 200.0 + i,
        "nvlink_rx_mib_s": 0.0,
        "nvlink_tx_mib_s": 0.0,
    }


class MetricsRequest:
    """``c_nvmlGpmMetricsGet_t``: numMetrics entries of metricId in; nvmlReturn and value out."""

    def __init__(self) -> None:
        self.version = 0
        self.numMetrics = 0
        self.sample1: Any = None
        self.sample2: Any = None
        self.metrics = [types.SimpleNamespace(metricId=0, nvmlReturn=0, value=0.0) for _ in range(477)]


@dataclass
class FakeGpm:
    """The GPM state of a fake box (see the module's docstring)."""

    m: FakeNvml
    auto_s: float = 0.5
    unsupported: set[int] = field(default_factory=set)  # isSupportedDevice 0 (an older GPU, or a vGPU)
    vgpu: set[int] = field(default_factory=set)
    errors: dict[tuple[str, int], int] = field(default_factory=dict)  # (function, GPU): NVML error raised
    metric_errors: dict[int, int] = field(default_factory=dict)  # metric id: its nvmlReturn
    mig: dict[int, dict[int, str]] = field(default_factory=dict)  # GPU in MIG mode: {GI id: MIG UUID}
    steady: dict[Source, dict[str, float]] = field(default_factory=dict)
    clock: dict[Source, float] = field(default_factory=dict)
    counters: dict[Source, dict[str, float]] = field(default_factory=dict)
    allocated: set[int] = field(default_factory=set)
    freed: list[int] = field(default_factory=list)
    calls: Counter[str] = field(default_factory=Counter)
    versions: list[int] = field(default_factory=list)  # the version of each MetricsGet request

    def run(self, source: Source, seconds: float, **rates: float) -> None:
        """``source`` works ``seconds`` at ``rates`` (a metric's field name: its value; others 0)."""
        counters = self.counters.setdefault(source, {})
        self.clock[source] = self.clock.get(source, 0.0) + seconds
        for key, _, _ in METRICS:
            counters[key] = counters.get(key, 0.0) + rates.get(key, 0.0) * seconds

    def check(self, name: str, gpu: int) -> None:
        self.calls[name] += 1
        if gpu in self.m.lost:
            raise NVMLError(GPU_IS_LOST)
        if (name, gpu) in self.errors:
            raise NVMLError(self.errors[(name, gpu)])

    def take(self, source: Source, buf: Buffer) -> Buffer:
        if buf.id not in self.allocated:
            raise NVMLError(INVALID_ARGUMENT)  # a freed (or never allocated) buffer
        if self.auto_s:
            self.run(source, self.auto_s, **self.steady.get(source, steady_rates(source)))
        buf.source, buf.time_s = source, self.clock.get(source, 0.0)
        buf.counters = dict(self.counters.get(source, {}))
        return buf

    def metrics_get(self, request: MetricsRequest) -> MetricsRequest:
        self.calls["nvmlGpmMetricsGet"] += 1
        self.versions.append(request.version)
        a, b = request.sample1, request.sample2
        if a.source is None or a.source != b.source or not a.time_s < b.time_s:
            raise NVMLError(INVALID_ARGUMENT)
        for entry in request.metrics[: request.numMetrics]:
            key = KEY_OF.get(entry.metricId)
            entry.nvmlReturn = self.metric_errors.get(entry.metricId, 0 if key else NOT_SUPPORTED)
            delta = b.counters.get(key or "", 0.0) - a.counters.get(key or "", 0.0)
            entry.value = delta / (b.time_s - a.time_s) if entry.nvmlReturn == 0 else 0.0
        return request


def add_gpm(m: FakeNvml) -> FakeGpm:
    """Give ``m`` (a ``fake_gpus`` module: handle = index) GPM on every GPU; the state that drives it."""
    g = FakeGpm(m)
    ids = iter(range(1, 1_000_000))

    def support(h: int) -> Any:
        g.check("nvmlGpmQueryDeviceSupport", h)
        return types.SimpleNamespace(version=1, isSupportedDevice=int(h not in g.unsupported | g.vgpu))

    def alloc() -> Buffer:
        g.calls["nvmlGpmSampleAlloc"] += 1
        buf = Buffer(next(ids))
        g.allocated.add(buf.id)
        return buf

    def free(buf: Buffer) -> None:
        g.calls["nvmlGpmSampleFree"] += 1
        if buf.id not in g.allocated:
            raise NVMLError(INVALID_ARGUMENT)  # freed twice
        g.allocated.discard(buf.id)
        g.freed.append(buf.id)

    def sample_get(h: int, buf: Buffer) -> Buffer:
        g.check("nvmlGpmSampleGet", h)
        if h in g.mig:
            raise NVMLError(NOT_SUPPORTED)  # under MIG: per GPU instance
        return g.take(h, buf)

    def mig_sample_get(h: int, gi: int, buf: Buffer) -> Buffer:
        g.check("nvmlGpmMigSampleGet", h)
        if gi not in g.mig.get(h, {}):
            raise NVMLError(NOT_FOUND)
        return g.take((h, gi), buf)

    _add_mig(m, g)
    for name, fn in {
        "nvmlGpmQueryDeviceSupport": support,
        "nvmlGpmSampleAlloc": alloc,
        "nvmlGpmSampleFree": free,
        "nvmlGpmSampleGet": sample_get,
        "nvmlGpmMigSampleGet": mig_sample_get,
        "nvmlGpmMetricsGet": g.metrics_get,
        "c_nvmlGpmMetricsGet_t": MetricsRequest,
        "NVML_GPM_METRICS_GET_VERSION": 1,
        "nvmlDeviceGetArchitecture": lambda h: AMPERE if h in g.unsupported else HOPPER,
        "nvmlDeviceGetVirtualizationMode": lambda h: 2 if h in g.vgpu else 0,
    }.items():
        setattr(m, name, fn)
    return g


def _add_mig(m: FakeNvml, g: FakeGpm) -> None:
    """MIG's queries: a GPU in ``g.mig`` reports MIG on and a MIG device per GPU instance; a MIG
    device's handle is ``("mig", gpu, gi)`` and its UUID ``g.mig[gpu][gi]``."""
    gpu_uuid = m.nvmlDeviceGetUUID

    def uuid(h: Any) -> str:
        return g.mig[h[1]][h[2]] if isinstance(h, tuple) else str(gpu_uuid(h))

    def by_index(h: int, i: int) -> tuple[str, int, int]:
        instances = sorted(g.mig.get(h, {}))
        if i >= len(instances):
            raise NVMLError(NOT_FOUND)  # an empty slot
        return ("mig", h, instances[i])

    m.nvmlDeviceGetUUID = uuid  # type: ignore[attr-defined]
    m.nvmlDeviceGetMigMode = lambda h: [1, 1] if h in g.mig else [0, 0]  # type: ignore[attr-defined]
    m.nvmlDeviceGetMaxMigDeviceCount = lambda h: 7 if h in g.mig else 0  # type: ignore[attr-defined]
    m.nvmlDeviceGetMigDeviceHandleByIndex = by_index  # type: ignore[attr-defined]
    m.nvmlDeviceGetGpuInstanceId = lambda h: h[2]  # type: ignore[attr-defined]
