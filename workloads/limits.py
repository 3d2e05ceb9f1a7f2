"""How much memory a batch size needs and how much there is: the arithmetic of the memory check.

Torch-free. ``Workload.check_change`` (``workloads.change_checks``) measures a step and asks here
whether a batch fits; the fixed limits (dataset, hard cap) are the catalog's
(``FamilyInfo.batch_refusal``).

A step's memory is fitted from probe steps at small batches as ``fixed + per_sample * n``
(``StepMemory``); host batches held at once (the pinned pool, a loader's prefetched batches)
come from the bytes of one sample times how many batches the configuration keeps.
"""

from __future__ import annotations

import resource
from dataclasses import dataclass

MEMORY_MARGIN = 0.9  # a batch may use this share of the room: fragmentation, what the estimate misses
GIB = 2**30


def size(n: float) -> str:
    """Bytes in binary units, 3 significant digits: ``41.2 GiB``, ``812 KiB``, ``1007 MiB``, ``64 B``:
    the one way gpudash and its workloads write bytes (``gpudash.core.memory_kinds`` hands it on)."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= scale:
            value = n / scale
            return f"{value:.3g} {unit}" if abs(value) < 1000 else f"{value:.0f} {unit}"
    return f"{n:.0f} B"


@dataclass(frozen=True)
class StepMemory:
    """Bytes a step needs beyond what is already held, as ``fixed + per_sample * n``: fitted
    from probe steps at a few small batch sizes (one probe: all of it per sample)."""

    fixed: float
    per_sample: float
    probed: tuple[int, ...]  # the batch sizes measured

    @classmethod
    def fit(cls, sizes: list[int], peaks: list[float], activations: list[float]) -> StepMemory:
        """A sample costs the slope of the activations (the bytes saved for backward) from the
        smallest probe to the largest; the line with that slope passes through the largest
        probe's peak, which keeps whatever else that step took (workspaces, gradients) in
        ``fixed``. Peaks set no slope: a library's workspace comes and goes between batch sizes
        (cuDNN took one at 4 samples and not at 1 for a small network on an H100, and the line
        through the peaks at 1 and 4 made its batch 2048 need 132 GiB; at 1024-pixel images a
        workspace at 4 samples hid the cost of the 8th). One probe, or no growth: all of the
        peak per sample."""
        n1, n2 = sizes[0], sizes[-1]
        slope = (activations[-1] - activations[0]) / (n2 - n1) if n2 > n1 else 0.0
        if slope <= 0:
            return cls(0.0, max(peaks[-1] / n2, 0.0), tuple(sizes))
        return cls(max(peaks[-1] - slope * n2, 0.0), slope, tuple(sizes))

    def at(self, batch_size: int) -> float:
        return self.fixed + self.per_sample * batch_size

    def how(self) -> str:
        """'4.1 MiB a sample, measured at batch 1, 4 and 16'."""
        *first, last = [str(n) for n in self.probed]
        at = f"{', '.join(first)} and {last}" if first else last
        return f"{size(self.per_sample)} a sample, measured at batch {at}"


# -- the machine -------------------------------------------------------------------------------------
def _kib_field(path: str, field: str) -> int | None:
    """A "Field:   123 kB" line of a /proc file, in bytes (None when absent or off Linux)."""
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def meminfo(field: str) -> int | None:
    """A field of ``/proc/meminfo`` in bytes ("MemAvailable"), or None when it cannot be read."""
    return _kib_field("/proc/meminfo", field)


def _cgroup_limit() -> int | None:
    """This process's cgroup memory limit (v2 ``memory.max`` or v1 ``limit_in_bytes``), if any."""
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path) as f:
                text = f.read().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < 2**60:  # v1 says "no limit" with a huge number
            return int(text)
    return None


def machine_ram() -> int | None:
    """RAM this process can have: MemTotal, or the cgroup's limit when lower."""
    known = [v for v in (_kib_field("/proc/meminfo", "MemTotal"), _cgroup_limit()) if v]
    return min(known) if known else None


def data_limit() -> int | None:
    """The soft RLIMIT_DATA of this process (the memory guard's), or None when unlimited."""
    soft, _ = resource.getrlimit(resource.RLIMIT_DATA)
    return None if soft == resource.RLIM_INFINITY else soft


def host_room() -> tuple[int, str] | None:
    """(bytes, what they are) this process can still allocate on the host: MemAvailable, or
    what is left under its data limit (VmData counts against it) when that is less. None when
    neither can be read."""
    rooms: list[tuple[int, str]] = []
    available = _kib_field("/proc/meminfo", "MemAvailable")
    if available is not None:
        rooms.append((available, "available"))
    limit, used = data_limit(), _kib_field("/proc/self/status", "VmData")
    if limit is not None and used is not None:
        rooms.append((max(limit - used, 0), f"left under the workload's memory limit of {size(limit)}"))
    return min(rooms) if rooms else None


def rss_bytes(pid: int) -> int | None:
    """Resident memory of process ``pid`` (VmRSS), or None when it is gone."""
    return _kib_field(f"/proc/{pid}/status", "VmRSS")
