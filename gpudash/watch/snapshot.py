"""The box's GPUs and their processes now, as plain dataclasses: what ``gpudash watch --once``
prints and the dashboard's process table shows. Torch-free and Textual-free.

Every figure comes from the NVML sampler's own queries (``gpudash.host.nvml_watch.read_gpu``; GPM's
SM, tensor and DRAM activity over its last tick or window) and NVML's process lists
(``nvml_watch.gpu_processes``); a query that fails leaves its field ``None`` and the rest stand. A
process's command is NVML's name for it; its user, and its command where NVML gives none, come from
the process itself (``gpudash.core.proctree``). A pid this machine does not show (a process in
another pid namespace: NVML gives the host's pids, a container sees its own) shows ``?`` rather
than a guess.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpudash.core import proctree
from gpudash.core.protocol import MigReading
from gpudash.core.textfmt import strip_controls
from gpudash.host.nvml import NvmlSampler
from gpudash.host.nvml_watch import NvmlProcess, gpu_processes, read_gpu

UNKNOWN = "?"  # a user or command that cannot be told
MAX_COMMAND = 4096  # characters of a command kept


@dataclass(frozen=True)
class GpuProcess:
    """A process on a GPU: pid, its user and command (``?``: not known here), its GPU memory
    (None: NVML gives none) and which of NVML's lists it is on ("compute", "graphics")."""

    pid: int
    user: str
    command: str
    used_memory_mib: float | None
    kinds: tuple[str, ...] = ("compute",)


@dataclass(frozen=True)
class GpuState:
    """One GPU now; ``None``: NVML gave nothing for it (``failed`` says why, by query)."""

    index: int
    name: str
    uuid: str
    utilization_pct: float | None = None
    sm_active_pct: float | None = None  # GPM (Hopper and newer): the SMs' time busy, tensor cores, DRAM
    tensor_active_pct: float | None = None
    dram_active_pct: float | None = None
    gpm: bool = False  # GPM is read on this GPU (its three figures are shown, n/a where not answered)
    memory_bandwidth_pct: float | None = None
    memory_used_mib: float | None = None
    memory_total_mib: float | None = None
    power_w: float | None = None
    sm_clock_mhz: float | None = None
    temperature_c: float | None = None
    throttle: str | None = None  # "sw_power_cap|hw_slowdown"; "" none; None not known
    processes: tuple[GpuProcess, ...] | None = None  # None: NVML could not list them
    failed: tuple[tuple[str, str], ...] = ()  # (query, why) for each query that gave nothing

    @property
    def throttle_reasons(self) -> list[str] | None:
        return None if self.throttle is None else [r for r in self.throttle.split("|") if r]


@dataclass(frozen=True)
class Snapshot:
    """The watched GPUs now (NVML indexes, in the order watched), or why there are none."""

    gpus: tuple[GpuState, ...] = ()
    driver: str | None = None
    unavailable: str | None = None  # NVML cannot be used here: why, in one line
    gpm_unavailable: str | None = None  # why GPM's figures are empty (some GPUs or all), in one line
    mig: tuple[MigReading, ...] = ()  # under MIG, each GPU instance's GPM figures ("GPU 0 · GI 1")


def take(sampler: NvmlSampler, with_processes: bool = True) -> Snapshot:
    """The GPUs ``sampler`` watches (opened: ``open()`` or ``start()``), read now."""
    info = sampler.info
    if not info.available:
        return Snapshot(driver=info.driver, unavailable=info.unavailable or "NVML is not available")
    uuids = sampler.uuids
    gpus = []
    for i in info.sampled:
        values, failed = read_gpu(sampler, i)
        procs: tuple[GpuProcess, ...] | None = None
        if with_processes:
            listed, why = gpu_processes(sampler, i)
            if listed is None:
                failed = {**failed, "processes": why or "not listed"}
            else:
                procs = tuple(describe(p) for p in listed)
        gpus.append(
            GpuState(
                index=i,
                name=strip_controls(info.names[i]) if i < len(info.names) else UNKNOWN,
                uuid=uuids[i] if i < len(uuids) else "",
                utilization_pct=values.get("gpu_util_pct"),
                sm_active_pct=values.get("sm_active_pct"),
                tensor_active_pct=values.get("tensor_active_pct"),
                dram_active_pct=values.get("dram_active_pct"),
                gpm=i in sampler.gpm.gpus and sampler.gpm.reason_for(i) is None,
                memory_bandwidth_pct=values.get("mem_bw_util_pct"),
                memory_used_mib=values.get("mem_used_mib"),
                memory_total_mib=values.get("mem_total_mib"),
                power_w=values.get("power_w"),
                sm_clock_mhz=values.get("sm_clock_mhz"),
                temperature_c=values.get("temp_c"),
                throttle=values.get("throttle"),
                processes=procs,
                failed=tuple(sorted(failed.items())),
            )
        )
    return Snapshot(
        tuple(gpus), driver=info.driver, gpm_unavailable=sampler.info.gpm_unavailable, mig=sampler.gpm.mig()
    )


def describe(p: NvmlProcess) -> GpuProcess:
    """NVML's entry with its user and command: NVML's name first, the process's own command line
    where NVML gives none; ``?`` for what neither can tell (a pid this machine does not show:
    another pid namespace)."""
    user = proctree.owner(p.pid)
    command = _clean(p.name) if p.name else None
    if command is None and user is not None:
        command = _clean(proctree.command_line(p.pid) or "")
    return GpuProcess(p.pid, user or UNKNOWN, command or UNKNOWN, p.used_memory_mib, p.kinds)


def _clean(text: str) -> str | None:
    """One line without control characters (no escape sequence from a process reaches the terminal)."""
    line = " ".join(strip_controls(" ".join(text.split())).split())[:MAX_COMMAND]  # line breaks: spaces
    return line or None
