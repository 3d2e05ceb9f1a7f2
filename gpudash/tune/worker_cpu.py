"""How busy a job's DataLoader workers are: the CPU they use over the time they live.

``tune`` climbs the worker count past the CPUs only while the workers mostly *wait* (a Dataset
that reads from storage or the network): a worker that computes gains nothing from a count past
the CPUs. The workers are found in the process tree under ``gpudash record``
(``gpudash.core.proctree``: one that ends while it is read is left out): a process whose
command line is its parent's (a fork) or names ``multiprocessing`` (spawn, forkserver), whose
parent is not ``gpudash record`` itself. A worker's CPU seconds are kept at the last reading
before it ends, so workers that an epoch's end replaces still count. Torch-free.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from gpudash.core.proctree import usage_under


@dataclass
class _Seen:
    cpu_s: float
    born: float
    last: float


@dataclass
class WorkerCpu:
    """Readings of the workers under ``root`` (the ``gpudash record`` process); ``read()`` each
    second or so, ``busy`` at the end."""

    root: int
    seen: dict[int, _Seen] = field(default_factory=dict)

    def read(self) -> None:
        """One look at the tree: each worker's CPU seconds so far."""
        tree = usage_under(self.root)
        lines = {u.pid: (u.parent, u.command) for u in tree}
        now = time.time()
        for u in tree:
            if is_worker(u.pid, lines, self.root):
                self.seen[u.pid] = _Seen(u.cpu_s, u.born, now)

    @property
    def count(self) -> int:
        """How many workers were seen."""
        return len(self.seen)

    @property
    def busy(self) -> float | None:
        """The workers' CPU seconds over their lifetimes (0–1 a worker); None where none was seen."""
        lived = sum(max(s.last - s.born, 0.0) for s in self.seen.values())
        return None if lived <= 0 else min(sum(s.cpu_s for s in self.seen.values()) / lived, 1.0)


def is_worker(pid: int, lines: dict[int, tuple[int, str]], root: int) -> bool:
    """Whether ``pid`` (in ``lines``: pid → (parent, command line)) is a worker of a job under ``root``."""
    parent, line = lines[pid]
    if parent == root or parent not in lines:
        return False  # the job itself (or its launcher)
    return line == lines[parent][1] or "multiprocessing" in line
