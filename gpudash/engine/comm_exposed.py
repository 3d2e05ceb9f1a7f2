"""The collectives' time in one profiler window (``gpudash.engine.trace_figures``): their kernels'
union inside the steps' span, the part of it no computation kernel ran beside (exposed), and each
kind's of both, as ``TraceFigures``' collectives fields. Torch-free."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gpudash.engine.collectives import COLLECTIVE_KINDS, collective_kind, is_collective
from gpudash.engine.intervals import Interval, clip, event_interval, length, union


@dataclass(frozen=True)
class Collectives:
    """The collectives' kernels inside the steps' span, µs: their union, its exposed part (no
    computation kernel running), and each kind's of both."""

    total_us: float
    exposed_us: float
    kind_us: dict[str, float]
    exposed_kind_us: dict[str, float]


def communication(kernels: Sequence[dict[str, Any]], span: Interval) -> Collectives | None:
    """The collectives inside ``span``; None without one (a run of one rank)."""
    by_kind: dict[str, list[Interval]] = {}
    compute: list[Interval] = []
    for k in kernels:
        name = str(k.get("name", ""))
        if is_collective(name):
            by_kind.setdefault(collective_kind(name), []).append(event_interval(k))
        else:
            compute.append(event_interval(k))
    if not by_kind:
        return None
    merged = {kind: clip(union(by_kind[kind]), span) for kind in COLLECTIVE_KINDS if kind in by_kind}
    alone = exposed_by_kind(merged, clip(union(compute), span))
    every = union(iv for ivs in merged.values() for iv in ivs)
    return Collectives(length(every), sum(alone.values()), {k: length(iv) for k, iv in merged.items()}, alone)


def exposed_by_kind(kinds: dict[str, list[Interval]], compute: Sequence[Interval]) -> dict[str, float]:
    """Each kind's time (its intervals merged) with no ``compute`` interval running; a moment that
    kinds share, on several streams, is split evenly between them (so the kinds sum to the union's)."""
    edges = [(t, kind, d) for kind, ivs in kinds.items() for a, b in ivs for t, d in ((a, 1), (b, -1))]
    edges += [(t, "", d) for a, b in compute for t, d in ((a, 1), (b, -1))]
    edges.sort(key=lambda edge: edge[0])
    active: dict[str, int] = {}
    out = dict.fromkeys(kinds, 0.0)
    last = edges[0][0] if edges else 0.0
    for t, kind, d in edges:
        running = [k for k, n in active.items() if n > 0 and k]
        if running and active.get("", 0) <= 0:
            for k in running:
                out[k] += (t - last) / len(running)
        active[kind] = active.get(kind, 0) + d
        last = t
    return out


def comm_fields(comm: Collectives | None, span_us: float, per_step: float) -> dict[str, Any]:
    """TraceFigures' collectives fields (ms of a traced step, the exposed share of the span)."""
    if comm is None:
        return {}
    return {
        "comm_ms_per_step": comm.total_us * per_step,
        "comm_exposed_ms_per_step": comm.exposed_us * per_step,
        "comm_exposed_share": min(1.0, comm.exposed_us / span_us) if span_us > 0 else 0.0,
        "comm_kind_ms_per_step": {k: us * per_step for k, us in comm.kind_us.items()},
        "comm_exposed_kind_ms_per_step": {k: us * per_step for k, us in comm.exposed_kind_us.items()},
    }
