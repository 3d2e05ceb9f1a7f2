"""The job's ranks as gpudash knows them: each process's hello, each rank's first step, the lead
rank, the world's size and where to send each rank a request. One owner for what every part of
the session asks about ranks. Torch-free.
"""

from __future__ import annotations

from typing import Any

from gpudash.core.lenient import int_or


class RankTable:
    """``hello(m)`` and ``first(m)`` as the job's processes say them; the rest reads."""

    def __init__(self) -> None:
        self.hellos: dict[int, dict[str, Any]] = {}  # pid -> the process's hello
        self.firsts: dict[int, dict[str, Any]] = {}  # rank -> its first step's message

    def hello(self, m: dict[str, Any]) -> None:
        self.hellos[int_or(m.get("pid"), 0)] = m

    def first(self, rank: int, m: dict[str, Any]) -> None:
        self.firsts[rank] = m
        self.hellos.setdefault(int_or(m.get("pid"), 0), m)

    @property
    def lead(self) -> int:
        """The rank whose steps are the run's: the lowest that has stepped (0 before any has)."""
        return min(self.firsts, default=0)

    @property
    def lead_first(self) -> dict[str, Any]:
        return self.firsts.get(self.lead, {})

    @property
    def stepped(self) -> int:
        """How many ranks have stepped."""
        return len(self.firsts)

    def world_size(self) -> int:
        """The world's size, as the ranks' first steps say it (at least the ranks seen)."""
        said = max((int_or(m.get("world"), 1) for m in self.firsts.values()), default=1)
        return max(said, len(self.firsts), 1)

    @property
    def on_cuda(self) -> bool:
        return str(self.lead_first.get("device", "")).startswith("cuda")

    def socket(self, rank: int) -> str:
        """Where to send ``rank`` a request ("" where its process named none)."""
        pid = int_or(self.firsts.get(rank, {}).get("pid"), 0)
        return str(self.hellos.get(pid, {}).get("ctl") or "")

    def targets(self) -> list[tuple[int, str, str]]:
        """Each rank's process: (pid, "rank N", its socket), lead first."""
        pids = {rank: int_or(first.get("pid"), 0) for rank, first in sorted(self.firsts.items())}
        return [(pid, f"rank {rank}", str(self.hellos.get(pid, {}).get("ctl") or "")) for rank, pid in pids.items()]
