"""A data-parallel job's straggler, live: the rank the others wait for, window by window.

Ranks of a data-parallel job step in lockstep — each waits for the others in the collectives — so
their step times agree and do not say which rank holds the others back. Each rank's own work does
(its step less the longest a collective of the step kept it waiting: ``gpudash.ranks.own_work``):
``StragglerWatch`` judges, as each window closes — once ``LIVE_MIN_WINDOWS`` windows with steps have
— the per-step own work of the latest ``LIVE_WINDOWS`` windows, and names a rank once it has been
the straggler there for ``WINDOWS`` windows in a row and is the straggler of the latest
``GATE_WINDOWS`` too; again when it no longer is. Not window by window, nor by the latest windows
alone: on GPUs two even ranks take the lead from each other for seconds at a time (one's host a few
ms behind for a while), and the steps of a few windows are alike enough to "separate" whichever is
behind then. Where the job's collectives are not timed (hooks of an older gpudash, a DDP hook in
C++), each rank's share of its step spent waiting for input says it instead: a rank that waits far
longer than the others is the one they wait for. Torch-free.
"""

from __future__ import annotations

import collections

from gpudash.ranks.own_work import StragglerVerdict, judge, rank_work

INPUT_SHARE = 0.20  # a rank waiting for input this share of its step or more ...
AHEAD = 0.15  # ... and this much more than every other rank: the straggler (collectives not timed)
WINDOWS = 3  # windows in a row before it is named
LIVE_WINDOWS = 10  # the live verdict is over this many latest windows' steps ...
LIVE_MIN_WINDOWS = 60  # ... and waits for this many windows with steps (15 s of 0.25-s windows: the
# first seconds of an even job on GPUs put one rank a few ms behind for a while, and were named)
GATE_WINDOWS = 60  # ... and names a rank only where the latest this many windows' steps name it too
KEPT_STEPS = 4096  # each rank's latest steps kept for the run's verdict


class StragglerWatch:
    """``window(shares, own_work)`` after each closed window: a line to tell, or ""."""

    def __init__(self) -> None:
        self.named: int | None = None  # the rank named now
        self._candidate: int | None = None
        self._seen = 0
        self._all: dict[int, tuple[collections.deque[float], collections.deque[float]]] = {}  # the run's steps
        self._recent: collections.deque[dict[int, tuple[list[float], list[float]]]] = collections.deque(
            maxlen=GATE_WINDOWS
        )  # the latest windows with steps: (own, comm) by rank
        self._shares: dict[int, float] = {}

    def window(
        self, shares: dict[int, float], own_work: dict[int, tuple[list[float], list[float]]] | None = None
    ) -> str:
        """Each rank's input-wait share of the window just closed, and its per-step (own, comm) ms."""
        fresh = {r: work for r, work in (own_work or {}).items() if work[0]}
        for each, (own, comm) in fresh.items():
            kept = self._all.setdefault(each, (_kept(), _kept()))
            kept[0].extend(own)
            kept[1].extend(comm)
        self._shares.update(shares)
        if self._all and not fresh:
            return ""  # own work is timed, but no step of it in this window (a pause, an evaluation)
        if fresh:
            self._recent.append(fresh)
        verdict = self._live_verdict(shares, LIVE_WINDOWS)
        if verdict is None and self._all:
            return ""  # own work is timed, but too few windows or steps of it yet to judge
        rank = verdict.rank if verdict is not None else _straggler(shares)
        if verdict is not None and rank is not None and (gate := self._live_verdict(shares)) is not None:
            rank = rank if gate.rank == rank else None  # behind of late, not over the last minute: two
            # even ranks on GPUs take turns a few ms behind for seconds at a time
        if rank != self._candidate:
            self._candidate, self._seen = rank, 0
        self._seen += 1
        if rank is not None and rank != self.named and self._seen >= WINDOWS:
            self.named = rank
            if verdict is not None:
                return verdict.words
            others = max(share for r, share in shares.items() if r != rank)
            return (
                f"rank {rank} is the straggler: it waits for its input {100 * shares[rank]:.0f}% of each step, "
                f"the other ranks at most {100 * others:.0f}% — they wait for it in the collectives; "
                f"give rank {rank}'s DataLoader more workers (num_workers) or lighter per-sample work"
            )
        if rank is None and self.named is not None and self._seen >= WINDOWS:
            was, self.named = self.named, None
            why = verdict.words if verdict is not None else "no rank waits for its input much longer than the others"
            return f"rank {was} keeps up again: {why}"
        return ""

    def _live_verdict(self, shares: dict[int, float], windows: int = 0) -> StragglerVerdict | None:
        """The verdict over the latest ``windows`` windows' steps (0: all kept, ``GATE_WINDOWS``);
        None: too few windows with steps yet."""
        if len(self._recent) < LIVE_MIN_WINDOWS:
            return None
        joined: dict[int, tuple[list[float], list[float]]] = {}
        for window in list(self._recent)[-windows:]:
            for rank, (own, comm) in window.items():
                kept = joined.setdefault(rank, ([], []))
                kept[0].extend(own)
                kept[1].extend(comm)
        return by_own_work(joined, shares)

    def run_verdict(self) -> StragglerVerdict | None:
        """The verdict over every step of the run so far (None: fewer than two ranks' own work)."""
        return by_own_work({r: (list(own), list(comm)) for r, (own, comm) in self._all.items()}, self._shares)


def by_own_work(
    own_work: dict[int, tuple[list[float], list[float]]], shares: dict[int, float]
) -> StragglerVerdict | None:
    """The verdict of one window's own work (None where fewer than two ranks have it)."""
    works = [w for rank, (own, comm) in sorted(own_work.items()) if (w := rank_work(rank, own, comm)) is not None]
    return judge(works, {r: 100 * s for r, s in shares.items()})


def _kept() -> collections.deque[float]:
    return collections.deque(maxlen=KEPT_STEPS)


def _straggler(shares: dict[int, float]) -> int | None:
    if len(shares) < 2:
        return None
    rank = max(shares, key=lambda r: shares[r])
    others = max(share for r, share in shares.items() if r != rank)
    return rank if shares[rank] >= INPUT_SHARE and shares[rank] - others >= AHEAD else None
