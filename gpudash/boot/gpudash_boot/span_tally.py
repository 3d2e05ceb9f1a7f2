"""The spans between two of a job's steps, tallied (``phases.py``'s arithmetic): the saves as one
checkpoint, the quiet stretches the spans and the marks bound, and each kind's own seconds where a
second two kinds share counts once. Standard library only."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

Span = tuple[str, float, float]  # (kind, start, end), monotonic seconds
Told = tuple[float, float, str, float]  # (start, end, kind, its own seconds)

EVALUATION, CHECKPOINT, COMPILE, OTHER, PROFILING = "evaluation", "checkpoint", "compile", "other", "profiling"
ORDER = (PROFILING, CHECKPOINT, EVALUATION, COMPILE, OTHER)  # who counts a shared second: the first
MIN_SPAN_S = 0.05  # a shorter span is part of the step, unless it is told by the job's own calls (below)
# an evaluation, a save or a compile between steps is its phase's once it lasts a median step (and at
# least this long; MIN_SPAN_S before OTHER_AFTER_STEPS steps are known); under MIN_SPAN_S it is said
# to gpudash quietly (counted, not a line of its own: it may come every few steps)
MIN_TOLD_S = 0.002
OTHER_MEDIANS = 3.0  # a quiet stretch over this many median steps (and MIN_SPAN_S) is ``other``...
OTHER_AFTER_STEPS = 3  # ... once this many steps' training seconds are known


def span_floor(recent: Sequence[float]) -> float:
    """How long an evaluation, a save or a compile lasts to be its phase's and not the step's, given
    the ``recent`` steps' training seconds: ``MIN_SPAN_S`` until ``OTHER_AFTER_STEPS`` are known,
    then a median step (at least ``MIN_TOLD_S``, at most ``MIN_SPAN_S``): a 40 ms evaluation every
    50 steps of 5 ms is not training."""
    if len(recent) < OTHER_AFTER_STEPS:
        return MIN_SPAN_S
    return min(MIN_SPAN_S, max(MIN_TOLD_S, statistics.median(recent)))


def other_s(recent: Sequence[float], blind: bool) -> float:
    """How long a quiet stretch is ``other``: over ``OTHER_MEDIANS`` median steps and ``MIN_SPAN_S``;
    never before ``OTHER_AFTER_STEPS`` steps, nor ``blind`` (on a GPU whose syncs are not counted)."""
    if blind or len(recent) < OTHER_AFTER_STEPS:
        return float("inf")
    return max(MIN_SPAN_S, OTHER_MEDIANS * statistics.median(recent))


def measure(intervals: list[tuple[float, float]]) -> float:
    """The seconds the union of ``intervals`` covers."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(intervals):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


def one_checkpoint(spans: list[Span], floor: float, final: bool) -> list[Span]:
    """The saves between two steps as one checkpoint, from the first's start to the last's end, where
    they span ``floor`` seconds or more (after the last step, ``final``: however quick); else none."""
    saves = [(s, e) for k, s, e in spans if k == CHECKPOINT]
    rest = [(k, s, e) for k, s, e in spans if k != CHECKPOINT]
    if saves and (final or max(e for _, e in saves) - min(s for s, _ in saves) >= floor):
        return [(CHECKPOINT, min(s for s, _ in saves), max(e for _, e in saves)), *rest]
    return rest


def quiet_stretches(since: float, spans: list[Span], marks: list[tuple[float, str]], long_s: float) -> list[Span]:
    """The quiet stretches since ``since`` (the last step's end) that the spans and ``marks`` bound:
    after a save, the checkpoint's; after the step's end, an evaluation's or gpudash's own work,
    ``other`` where longer than ``long_s``; after training work or compiling, the step's."""
    things = sorted([(s, e, k) for k, s, e in spans] + [(t, t, k) for t, k in marks])
    reach, after, out = since, "", []
    for start, end, kind in things:
        if start > reach and after in ("", EVALUATION, CHECKPOINT, PROFILING):
            out.append((CHECKPOINT if after == CHECKPOINT else OTHER, reach, start))
        if end >= reach:
            reach, after = end, kind
    return [(k, s, e) for k, s, e in out if k == CHECKPOINT or e - s > long_s]


def by_kind(spans: list[Span]) -> tuple[list[Told], float]:
    """Each kind's span (its first start to its last end) with its own seconds, in ``ORDER``, a kind
    of none left out; and the seconds of all the spans' union."""
    taken: list[tuple[float, float]] = []
    out: list[Told] = []
    for kind in ORDER:
        mine = [(s, e) for k, s, e in spans if k == kind]
        if mine:
            seconds = measure(mine + taken) - measure(taken)
            taken += mine
            out.append((min(s for s, _ in mine), max(e for _, e in mine), kind, seconds))
    return out, measure(taken)
