"""How busy a job's DataLoader workers are and what memory they hold, and how far past the CPUs
``tune``'s worker climb may go on those readings.

The workers are found in the process tree under ``gpudash record``
(``gpudash.core.proctree.workers_under``: one that ends while it is read is left out). A worker's
CPU seconds are kept at the last reading before it ends, so workers that an epoch's end replaces
still count. Its memory is what it holds alone (USS; its RSS where that
cannot be read), the most the workers held on average at one reading, beside the least memory the
machine had free while they ran.

``no_room`` bounds the climb: N workers that are each busy a share s of a CPU use N·s CPUs, so a
count past the CPUs is tried only while N·s fits in them (workers that mostly wait on storage or
the network leave room for many); and going from one count to a higher one adds that many
workers' memory, tried only while it fits in ``MEMORY_SHARE`` of what was free. ``ceiling`` is a
guard, not a bound: the climb never lists more than ``GUARD_WORKERS`` a rank (or the CPUs where
there are more). Torch-free.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from gpudash.core.memory_kinds import size
from gpudash.core.proctree import memory_available, own_memory, workers_under

GUARD_WORKERS = 64  # the climb's ceiling a rank (the CPUs where there are more): a guard only
MEMORY_SHARE = 0.75  # more workers may take at most this share of the memory free while the last count ran
GIB = float(2**30)


@dataclass
class _Seen:
    cpu_s: float
    born: float
    last: float


@dataclass(frozen=True)
class WorkerMemory:
    """What one run's workers held: each one's own bytes (at the fullest reading) and the bytes the
    machine had free (at the tightest)."""

    per_worker: float
    free: float


@dataclass
class WorkerCpu:
    """Readings of the workers under ``root`` (the ``gpudash record`` process); ``read()`` each
    second or so, ``busy`` and ``memory`` at the end."""

    root: int
    seen: dict[int, _Seen] = field(default_factory=dict)
    per_worker: float = 0.0
    free: float | None = None

    def read(self) -> None:
        """One look at the tree: each worker's CPU seconds so far, and the memory they hold now."""
        now = time.time()
        held = []
        for u in workers_under(self.root):
            self.seen[u.pid] = _Seen(u.cpu_s, u.born, now)
            held.append(own_memory(u.pid))
        known = [m for m in held if m is not None]
        if known:
            self.per_worker = max(self.per_worker, sum(known) / len(known))
            free = float(memory_available())
            self.free = free if self.free is None else min(self.free, free)

    @property
    def count(self) -> int:
        """How many workers were seen."""
        return len(self.seen)

    @property
    def busy(self) -> float | None:
        """The workers' CPU seconds over their lifetimes (0–1 a worker); None where none was seen."""
        lived = sum(max(s.last - s.born, 0.0) for s in self.seen.values())
        return None if lived <= 0 else min(sum(s.cpu_s for s in self.seen.values()) / lived, 1.0)

    @property
    def memory(self) -> WorkerMemory | None:
        """What the workers held and what was free meanwhile; None where no worker's memory was read."""
        return None if self.free is None else WorkerMemory(self.per_worker, self.free)


def ceiling(cpus: int) -> int:
    """The most workers a rank the climb lists: ``GUARD_WORKERS``, or the CPUs where there are more."""
    return max(GUARD_WORKERS, cpus)


def no_room(n: int, at: int, busy: float | None, memory: WorkerMemory | None, cpus: int, ranks: int = 1) -> str | None:
    """Why ``n`` workers a rank are not tried, read from a run with ``at`` workers a rank whose
    workers were each ``busy`` (their share of a CPU) and held ``memory``; None where there is room.
    ``cpus``: the CPUs a rank may use; ``ranks``: the job's ranks here, each with its own loader."""
    if n > cpus:
        if busy is None:
            return f"{n} would be past the {cpus} CPUs and no worker's busy share was read"
        if n * busy > cpus:
            return (
                f"{n} would need ~{n * busy:.2g} CPUs of the {cpus}: the workers' busy share ({busy:.0%} of a CPU each)"
            )
    if memory is not None and n > at:
        more = (n - at) * ranks
        need = more * memory.per_worker
        if need > MEMORY_SHARE * memory.free:
            return (
                f"{more} more would need ~{size(need)} of the {size(memory.free)} free "
                f"({size(memory.per_worker)} a worker; more workers may take {MEMORY_SHARE:.0%} of it)"
            )
    return None
