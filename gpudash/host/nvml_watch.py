"""``gpudash watch``'s reads of one GPU on demand, through an open ``NvmlSampler``: every query of
the sampler now (``read_gpu``), the processes NVML lists on it (``gpu_processes``), and GPM's
window for ``watch --once`` (``gpm_window``), where no tick came before. Each holds the sampler's
lock around NVML and says what failed rather than raise.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any

from gpudash.host.nvml import NvmlSampler
from gpudash.host.nvml_queries import text

NOT_AVAILABLE_U64 = 2**64 - 1  # NVML_VALUE_NOT_AVAILABLE in an unsigned long long (a process's memory)
PROCESS_LISTS = (
    ("compute", "nvmlDeviceGetComputeRunningProcesses"),
    ("graphics", "nvmlDeviceGetGraphicsRunningProcesses"),
)  # NVML's lists of a GPU's processes: the kind each names, its query


@dataclass(frozen=True)
class NvmlProcess:
    """A process on a GPU as NVML lists it: pid (the host's), its GPU memory (None: NVML gives
    none), which lists it is on ("compute", "graphics") and NVML's name for it (None: none)."""

    pid: int
    used_memory_mib: float | None
    kinds: tuple[str, ...]
    name: str | None


def gpm_window(sampler: NvmlSampler, seconds: float) -> None:
    """GPM's two samples ``seconds`` apart, now (``watch --once``: no tick came before); blocks."""
    for wait in (0.0, seconds if sampler.gpm.active else 0.0):
        time.sleep(wait)
        with sampler.lock:
            if sampler.nvml is not None:
                sampler.tick_gpm()


def read_gpu(sampler: NvmlSampler, index: int) -> tuple[dict[str, Any], dict[str, str]]:
    """GPU ``index``'s values now by the sampler's queries (not energy, not processes; GPM: the last
    tick's), and why each query that gave nothing failed: a failing query leaves its fields out."""
    values: dict[str, Any] = {}
    failed: dict[str, str] = {}
    if sampler.nvml is None:
        return values, {"nvml": sampler.info.unavailable or "NVML is not open"}
    with sampler.lock:
        try:
            handle = sampler.nvml.nvmlDeviceGetHandleByIndex(index)
        except Exception as exc:  # noqa: BLE001 - said, not raised
            return values, {"handle": str(exc) or type(exc).__name__}
        for name, query in sampler.metrics.items():
            if name in ("energy", "processes"):
                continue
            try:
                values.update(query(handle))
            except Exception as exc:  # noqa: BLE001 - this field is empty; the others stand
                failed[name] = str(exc) or type(exc).__name__
        values.update(sampler.gpm.figures(index))  # the last tick's (``gpm_window`` without ticks)
    return values, failed


def gpu_processes(sampler: NvmlSampler, index: int) -> tuple[list[NvmlProcess] | None, str | None]:
    """The processes on GPU ``index`` as NVML lists them (compute and graphics, one entry per
    pid) with NVML's name for each where it gives one; (None, why) when neither list answers."""
    nvml = sampler.nvml
    if nvml is None:
        return None, sampler.info.unavailable or "NVML is not open"
    found: dict[int, NvmlProcess] = {}
    errors: list[str] = []
    with sampler.lock:
        try:
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
        except Exception as exc:  # noqa: BLE001
            return None, str(exc) or type(exc).__name__
        for kind, query in PROCESS_LISTS:
            try:
                listed = getattr(nvml, query)(handle)
            except Exception as exc:  # noqa: BLE001 - the other list may answer
                errors.append(f"{kind}: {exc or type(exc).__name__}")
                continue
            for p in listed:
                add_process(found, nvml, kind, int(p.pid), getattr(p, "usedGpuMemory", None))
    if len(errors) == 2:
        return None, "; ".join(errors)
    return sorted(found.values(), key=lambda p: p.pid), None


def add_process(found: dict[int, NvmlProcess], nvml: Any, kind: str, pid: int, used: Any) -> None:
    """Process ``pid`` on NVML's ``kind`` list, using ``used`` bytes, into ``found``: a pid on both
    lists is one process, with its larger figure."""
    mib = used / 2**20 if isinstance(used, int) and 0 <= used < NOT_AVAILABLE_U64 else None
    seen = found.get(pid)
    if seen is None:
        found[pid] = NvmlProcess(pid, mib, (kind,), process_name(nvml, pid))
    else:
        most = max((m for m in (seen.used_memory_mib, mib) if m is not None), default=None)
        found[pid] = replace(seen, used_memory_mib=most, kinds=(*seen.kinds, kind))


def process_name(nvml: Any, pid: int) -> str | None:
    """NVML's name of process ``pid`` (None where it gives none)."""
    try:
        name = text(nvml.nvmlSystemGetProcessName(pid))
    except Exception:  # noqa: BLE001 - not every process is named
        return None
    return name or None
