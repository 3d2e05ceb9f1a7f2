"""The straggler of a data-parallel job, by each rank's own work. Torch-free.

The ranks of a data-parallel job take the same step time — the fast ones wait for the slow one
inside the collectives — so the slowest by step time is chance. A rank's *own work* is its step
less the longest a collective of the step kept it waiting (the hooks time each collective from its
entry to its completion: ``gpudash/boot/gpudash_boot/comm.py``): a rank that waits for another
has its collectives outstanding the longer. The straggler is the rank whose own work is the longest,
named only where its interval (95%, over its steps or windows) is clear of every other rank's and
its mean at least ``SEPARATE`` times theirs; otherwise no rank is named. The same rule serves the
live ranks line, ``record``'s words, ``report``'s world (across nodes) and ``diagnose``.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

SEPARATE = 1.03  # the straggler's own work is at least this many times every other rank's
MIN_VALUES = 5  # a rank's own work is judged over at least this many steps (or windows) ...
BATCHES = 8  # ... in at most this many batches, whose means give its interval
T95 = {4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365}  # Student's t, 97.5%, by degrees of freedom


@dataclass(frozen=True)
class RankWork:
    """One rank's own work and its collectives' time, ms a step (mean ± half-width)."""

    rank: int
    own_ms: float
    half_ms: float
    comm_ms: float
    n: int


@dataclass(frozen=True)
class StragglerVerdict:
    """The rank the others wait for (None: no rank is), and the words that say so."""

    rank: int | None
    words: str
    ranks: tuple[RankWork, ...] = ()
    short: str = ""  # the same for a line of its own: "straggler rank 2: own work 19 ms vs 2.5 ms"

    def wait_of(self, rank: int) -> float | None:
        """How long ``rank`` waits for the straggler in the collectives, ms a step: its collectives'
        time less the straggler's own (the data's movement, which every rank spends); 0 for the
        straggler itself; None where no rank is named or ``rank``'s figures are not among these."""
        if self.rank is None:
            return None
        works = {w.rank: w for w in self.ranks}
        if rank not in works or self.rank not in works:
            return None
        return 0.0 if rank == self.rank else max(0.0, works[rank].comm_ms - works[self.rank].comm_ms)


def rank_work(rank: int, own_ms: list[float], comm_ms: list[float]) -> RankWork | None:
    """A rank's figures from its per-step (or per-window) own work and collective times: the mean,
    and a 95% interval over ``BATCHES`` consecutive batches' means (steps in a row are alike: an
    interval over single steps would be too narrow); None with fewer than ``MIN_VALUES``."""
    values = [v for v in own_ms if math.isfinite(v)]
    if len(values) < MIN_VALUES:
        return None
    k = min(BATCHES, len(values))
    means = [statistics.fmean(values[i * len(values) // k : (i + 1) * len(values) // k]) for i in range(k)]
    half = T95[k - 1] * statistics.stdev(means) / math.sqrt(k)
    comm = statistics.fmean(comm_ms) if comm_ms else 0.0
    return RankWork(rank, statistics.fmean(values), half, comm, len(values))


def judge(works: list[RankWork], input_pct: dict[int, float] | None = None) -> StragglerVerdict | None:
    """The straggler among ``works`` (two ranks or more, else None)."""
    if len(works) < 2:
        return None
    ranked = sorted(works, key=lambda w: w.own_ms, reverse=True)
    top, others = ranked[0], ranked[1:]
    ahead = max(others, key=lambda w: w.own_ms + w.half_ms)
    rest_mean = statistics.fmean(w.own_ms for w in others)
    spread = (top.own_ms / min(w.own_ms for w in works) - 1.0) if min(w.own_ms for w in works) > 0 else 0.0
    clear = top.own_ms - top.half_ms > ahead.own_ms + ahead.half_ms
    if clear and top.own_ms >= SEPARATE * max(w.own_ms for w in others):
        wait = statistics.fmean(w.comm_ms for w in others) - top.comm_ms
        words = (
            f"straggler: rank {top.rank} — its own work {_ms(top.own_ms)} ms a step against "
            f"{_ms(rest_mean)} ms for the others ({top.own_ms / rest_mean:.1f}×)"
            if rest_mean > 0
            else f"straggler: rank {top.rank} — its own work {_ms(top.own_ms)} ms a step"
        )
        if wait > 0:
            words += f"; the others wait {_ms(wait)} ms a step for it in a collective"
        pct = (input_pct or {}).get(top.rank)
        if pct is not None:
            words += f"; its input waits {pct:.0f}%"
        short = f"straggler rank {top.rank}: own work {_ms(top.own_ms)} ms vs {_ms(rest_mean)} ms"
        return StragglerVerdict(top.rank, words, tuple(works), short)
    if spread <= SEPARATE - 1.0:
        words = f"no straggler (ranks' own work within {100 * (SEPARATE - 1):.0f}%)"
        short = f"no straggler (own work within {100 * (SEPARATE - 1):.0f}%)"
    else:
        words = f"no straggler named: rank {top.rank}'s own work is {100 * spread:.0f}% over the least, in the noise"
        short = f"no straggler named (own work {100 * spread:.0f}% apart, in the noise)"
    return StragglerVerdict(None, words, tuple(works), short)


def _ms(value: float) -> str:
    return f"{value:.3g}" if value < 1000 else f"{value:,.0f}"
