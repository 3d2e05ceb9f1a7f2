"""What NVML says, produced in the parent (``gpudash.host.nvml``): the machine's GPUs
(``GpuInfo``) and each tick's readings (``GpuSample``, with a ``GpuReading`` per GPU watched and
a ``MigReading`` per MIG instance). Torch-free.
"""

from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass(frozen=True)
class GpuInfo:
    """What NVML says about the machine; ``unavailable`` says why NVML gives nothing."""

    available: bool
    unavailable: str | None = None
    driver: str | None = None
    names: tuple[str, ...] = ()  # every GPU of the machine, by index
    index: int | None = None  # the GPU sampled (the workload's device)
    sampled: tuple[int, ...] = ()  # the GPUs with a per-GPU reading in every sample (NVML indexes, in order)
    gpm_unavailable: str | None = None  # why the GPM figures (SM, tensor, DRAM activity) stay empty; None: they flow
    link: str | None = None  # the link between the sampled GPUs and its peak one way ("NVLink (18 links …) 478 GB/s")
    link_gbps: float | None = None  # ... that peak, GB/s (gpudash.host.links)

    @property
    def name(self) -> str | None:
        if self.index is None or self.index >= len(self.names):
            return None
        return self.names[self.index]


@dataclass(frozen=True)
class GpuReading:
    """One GPU's telemetry in an NVML tick (``GpuSample.per_gpu``); ``None``: not available.
    The fields are the catalog's per-GPU metrics (``gpudash.core.metrics.PER_GPU_KEYS``) and the total memory."""

    index: int  # the NVML index (as nvidia-smi numbers the GPUs)
    gpu_util_pct: float | None = None
    mem_used_mib: float | None = None
    mem_total_mib: float | None = None
    power_w: float | None = None
    sm_clock_mhz: float | None = None
    temp_c: float | None = None
    sm_active_pct: float | None = None  # GPM (Hopper and newer)
    tensor_active_pct: float | None = None
    dram_active_pct: float | None = None

    @property
    def answered(self) -> bool:
        """Some query for this GPU answered this tick (False: every one failed)."""
        return any(getattr(self, f.name) is not None for f in fields(self) if f.name != "index")


@dataclass(frozen=True)
class MigReading:
    """One MIG GPU instance's GPM figures in an NVML tick (``GpuSample.mig``)."""

    label: str  # "GPU 0 · GI 1": the GPU's NVML index and the GPU instance's id
    sm_active_pct: float | None = None
    tensor_active_pct: float | None = None
    dram_active_pct: float | None = None


MIG_FIGURES = ("sm_active_pct", "tensor_active_pct", "dram_active_pct")  # a MigReading's figures, in its order


@dataclass(frozen=True)
class GpuSample:
    """One NVML tick. ``None`` means not available (unsupported on this GPU, or the query failed)."""

    time_s: float
    gpu_util_pct: float | None = None  # kernel-active %: share of time any kernel ran, NOT SM occupancy
    mem_bw_util_pct: float | None = None
    mem_used_mib: float | None = None
    mem_total_mib: float | None = None
    power_w: float | None = None
    sm_clock_mhz: float | None = None
    temp_c: float | None = None
    energy_j: float | None = None  # energy since the sampler started
    throttle: str | None = None  # active throttle reasons, e.g. "sw_power_cap|hw_slowdown"; "" if none
    # GPM, NVML's GPU performance monitoring (Hopper and newer), over the tick: None where not
    # supported (``GpuInfo.gpm_unavailable`` says why) or not answered this tick
    sm_active_pct: float | None = None  # share of the SMs' time they were busy (not "a kernel ran")
    sm_occupancy_pct: float | None = None
    tensor_active_pct: float | None = None
    hmma_active_pct: float | None = None
    dfma_active_pct: float | None = None
    dram_active_pct: float | None = None
    pcie_tx_mib_s: float | None = None
    pcie_rx_mib_s: float | None = None
    nvlink_tx_mib_s: float | None = None
    nvlink_rx_mib_s: float | None = None
    # MIG: each GPU instance's GPM figures, labelled ("GPU 0 · GI 1"); () without MIG
    mig: tuple[MigReading, ...] = ()
    per_gpu: tuple[GpuReading, ...] = ()  # every GPU watched (``GpuInfo.sampled``), the workload's included
    gpu_pids: tuple[int, ...] | None = None  # the compute processes on the workload's GPU (None: not read)
