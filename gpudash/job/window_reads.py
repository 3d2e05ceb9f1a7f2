"""The ranks' traces of one profiler window gathered, so that its collectives are matched across
the ranks (``gpudash.engine.comm_split``: transfer told from waiting) before the lead rank's figures
make a verdict. A window whose other ranks' traces do not all come within ``GATHER_S`` of the
first is taken as it is. Torch-free."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from gpudash.engine.comm_split import RankComm, split
from gpudash.job.traces import TraceRead

GATHER_S = 30.0  # the longest a window's first trace waits for the other ranks'


class WindowReads:
    """``add(read)`` each trace read; it gives back each window whose ranks' reads are all in, and
    ``due()`` those that waited ``GATHER_S`` for the rest."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._open: dict[str, tuple[float, list[TraceRead]]] = {}

    def add(self, read: TraceRead) -> list[list[TraceRead]]:
        if read.ranks <= 1:
            return [[read]]
        since, reads = self._open.setdefault(read.window, (self.clock(), []))
        reads.append(read)
        if len(reads) < read.ranks:
            return []
        del self._open[read.window]
        return [reads]

    def due(self) -> list[list[TraceRead]]:
        now = self.clock()
        late = [window for window, (since, _) in self._open.items() if now - since >= GATHER_S]
        return [self._open.pop(window)[1] for window in late]


def matched(reads: Sequence[TraceRead]) -> dict[int, RankComm]:
    """Each rank's collectives of one window, matched across the ranks whose traces were read ({}:
    fewer than two)."""
    read = [r for r in reads if r.figures is not None]
    if len(read) < 2:
        return {}
    steps = min(r.figures.steps for r in read)
    sizes = next((r.comm_sizes for r in sorted(read, key=lambda r: r.rank) if r.comm_sizes), None)
    return split({r.rank: r.figures.collectives for r in read}, steps, sizes)


def comm_figures(comm: RankComm | None) -> dict[str, float]:
    """A rank's matched collectives as a trace's figures (none where not matched)."""
    if comm is None:
        return {}
    out = {
        "comm_transfer_ms_per_step": comm.transfer_ms,
        "comm_transfer_exposed_ms_per_step": comm.transfer_exposed_ms,
        "comm_wait_ms_per_step": comm.wait_ms,
        "comm_wait_exposed_ms_per_step": comm.wait_exposed_ms,
        "comm_matched": float(comm.matched),
    }
    if comm.last_rank is not None:
        out["comm_last_rank"] = float(comm.last_rank)
    if comm.busbw_gbps is not None:
        out["comm_busbw_gbps"] = comm.busbw_gbps
    return out


def comm_words(comm: RankComm | None) -> str:
    """ "; collectives: the data moves 0.46 ms a step (0.12 exposed), waiting for rank 0 48 ms (exposed)"."""
    if comm is None:
        return ""
    whom = f"rank {comm.last_rank}" if comm.last_rank is not None else "the last rank to arrive"
    wait = f", waiting for {whom} {comm.wait_exposed_ms:.3g} ms exposed" if comm.wait_exposed_ms >= 0.01 else ""
    moved = f"{comm.transfer_ms:.3g} ms a step ({comm.transfer_exposed_ms:.3g} exposed)"
    if comm.busbw_gbps is not None:
        moved += f" at {comm.busbw_gbps:,.0f} GB/s of bus bandwidth"
    return f"; collectives: the data moves {moved}{wait}"
