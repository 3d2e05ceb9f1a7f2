"""The stats panel's ranks line: a data-parallel run in one line. Torch- and Textual-free.

Its ranks' step times (and exposed all-reduce), the straggler by the ranks' own work
(``gpudash.ranks.own_work``: each rank's own work over its latest ``OWN_WINDOWS`` windows, kept by
``RankWindows``), the all-reduce's exposed time from the last profiler window and the last scaling
efficiency. The ranks of a data-parallel job take the same step time (the fast ones wait for the slow
one in the collectives), so where no rank's own work is known (a job whose collectives are not
timed, a recording of an older gpudash) the line says the slowest by step time, as it did before.
"""

from __future__ import annotations

from collections import deque
from typing import Protocol

from gpudash.core.protocol import Event, RankSample, Sample
from gpudash.ranks.own_work import StragglerVerdict, judge, rank_work
from gpudash.tui.markers import trace_of

OWN_WINDOWS = 20  # each rank's latest windows the straggler is judged over
RANKS_SHOWN = 8  # ranks named one by one in the ranks line; past that, counted


class RankWindows:
    """Each rank's own work and collectives' time (ms a step) over its latest ``windows`` windows."""

    def __init__(self, windows: int = OWN_WINDOWS) -> None:
        self._windows = windows
        self._own: dict[int, deque[tuple[float, float | None]]] = {}

    def add(self, r: RankSample) -> None:
        """A rank's window (one without own work is not kept)."""
        if r.own_ms is not None:
            self._own.setdefault(r.rank, deque(maxlen=self._windows)).append((r.own_ms, r.comm_ms))

    def clear(self) -> None:
        """Forget every window (another configuration, a restart: other own work)."""
        self._own.clear()

    def verdict(self, input_pct: dict[int, float] | None = None) -> StragglerVerdict | None:
        """The straggler over the windows kept (None: fewer than two ranks with enough of them)."""
        works = [
            w
            for rank, kept in sorted(self._own.items())
            if (w := rank_work(rank, [o for o, _ in kept], [c for _, c in kept if c is not None])) is not None
        ]
        return judge(works, input_pct)


class RanksState(Protocol):
    """What the ranks line reads of the dashboard's state (``DashState``, which holds a ``RankWindows``)."""

    @property
    def last_sample(self) -> Sample | None: ...
    @property
    def ranks(self) -> dict[int, RankSample]: ...
    @property
    def rank_windows(self) -> RankWindows: ...
    @property
    def last_trace(self) -> Event | None: ...
    @property
    def last_scaling(self) -> Event | None: ...


def ranks_line(state: RanksState) -> str | None:
    """A data-parallel run in one line: ranks, the straggler (or the slowest by step time where no own
    work is known), the all-reduce's exposed time from the last profiler window, the last scaling
    efficiency. None for a run of one process."""
    s = state.last_sample
    if s is None or s.world_size < 2:
        return None
    parts = [f"{s.world_size} ranks (DDP)"]
    ranks = sorted(state.ranks.values(), key=lambda r: r.rank)
    timed = [r for r in ranks if r.step_ms_p50 is not None]
    if len(timed) > 1:  # each rank's step time; its exposed all-reduce where a profiler window gave one
        each = [f"r{r.rank} {r.step_ms_p50:.3g}" + _exposed(r) for r in timed[:RANKS_SHOWN]]
        more = f" +{len(timed) - RANKS_SHOWN} more" if len(timed) > RANKS_SHOWN else ""
        parts.append("ms/step p50 (all-reduce exposed): " + ", ".join(each) + more)
    pct = {r.rank: r.input_wait_pct for r in ranks if r.input_wait_pct is not None}
    verdict = state.rank_windows.verdict(pct)
    if verdict is not None:
        parts.append(verdict.short)
    elif s.slowest_rank is not None and s.slowest_rank_step_ms is not None:
        parts.append(f"slowest rank {s.slowest_rank}: {s.slowest_rank_step_ms:.3g} ms/step p50")
    trace = state.last_trace
    note = trace_of(trace)
    exposed = note.figure("comm_exposed_ms_per_step") if note is not None else None
    if trace is not None and exposed and not any(r.allreduce_exposed_ms is not None for r in ranks):
        parts.append(f"all-reduce exposed {exposed:.3g} ms/step (t={trace.time_s:.0f} s)")
    e = state.last_scaling
    if e is not None and "scaling_efficiency" in e.details:
        parts.append(f"scaling efficiency {float(e.details['scaling_efficiency']):.2f} (t={e.time_s:.0f} s)")
    return " · ".join(parts)


def _exposed(r: RankSample) -> str:
    return f" ({r.allreduce_exposed_ms:.2g})" if r.allreduce_exposed_ms is not None else ""
