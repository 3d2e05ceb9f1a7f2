"""How busy a job's DataLoader workers were over a diagnosis' timed window: each worker's CPU
seconds at the window's start and end (found as ``tune`` finds them:
``gpudash.core.proctree.workers_under``), over the window's wall time. A worker that an epoch's
end replaces counts from its first look. Torch-free."""

from __future__ import annotations

import time
from collections.abc import Callable

from gpudash.core.proctree import workers_under

LOOK_EVERY_S = 0.5  # the process tree is read at most this often


class WorkerBusy:
    """``look(now)`` during the window (throttled), ``share()`` at its end: the workers' mean busy
    share of a CPU each (0–1; None where no worker was seen) and how many were seen."""

    def __init__(self, root: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.root = root
        self.clock = clock
        self.first: dict[int, tuple[float, float]] = {}  # pid -> (when, CPU seconds) at its first look
        self.last: dict[int, tuple[float, float]] = {}  # ... and at its latest
        self.looked_at = float("-inf")

    def look(self, force: bool = False) -> None:
        now = self.clock()
        if not force and now - self.looked_at < LOOK_EVERY_S:
            return
        self.looked_at = now
        for u in workers_under(self.root):
            self.first.setdefault(u.pid, (now, u.cpu_s))
            self.last[u.pid] = (now, u.cpu_s)

    def share(self) -> tuple[float | None, int]:
        """The workers' CPU seconds over the time each was watched, a mean share of a CPU (0–1)."""
        lived = cpu = 0.0
        for pid, (began, cpu0) in self.first.items():
            ended, cpu1 = self.last[pid]
            lived += ended - began
            cpu += max(0.0, cpu1 - cpu0)
        return (None if lived <= 0 else min(cpu / lived, 1.0)), len(self.first)
