"""Time intervals of a trace (µs): merged, measured, clipped to a span, and the time two or more
lists run at once. Torch-free."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

Interval = tuple[float, float]  # (start, end) in µs


def event_interval(e: dict[str, Any]) -> Interval:
    """A trace event's (start, end), µs: its ``ts`` and ``ts + dur``."""
    start = float(e["ts"])
    return start, start + float(e["dur"])


def union(intervals: Iterable[Interval]) -> list[Interval]:
    """The intervals merged: sorted, disjoint."""
    out: list[Interval] = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def length(intervals: Sequence[Interval]) -> float:
    return sum(b - a for a, b in intervals)


def covered_by_two_or_more(per_stream: Sequence[Sequence[Interval]]) -> float:
    """How long at least two of the (each merged) interval lists are active at once."""
    edges: list[tuple[float, int]] = []
    for intervals in per_stream:
        for a, b in intervals:
            edges += [(a, 1), (b, -1)]
    edges.sort()
    total, active, last = 0.0, 0, 0.0
    for t, step in edges:
        if active >= 2:
            total += t - last
        active += step
        last = t
    return total


def clip(intervals: Iterable[Interval], span: Interval) -> list[Interval]:
    """The parts of (disjoint) intervals inside ``span``."""
    lo, hi = span
    return [(max(a, lo), min(b, hi)) for a, b in intervals if b > lo and a < hi]


def minus(interval: Interval, others: Sequence[Interval]) -> list[Interval]:
    """The parts of ``interval`` that none of ``others`` (sorted, disjoint) covers."""
    a, b = interval
    out: list[Interval] = []
    for lo, hi in others:
        if hi <= a or lo >= b:
            continue
        if lo > a:
            out.append((a, lo))
        a = max(a, hi)
        if a >= b:
            break
    if a < b:
        out.append((a, b))
    return out
