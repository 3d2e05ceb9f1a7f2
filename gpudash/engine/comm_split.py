"""A profiler window's collectives told apart into transfer and wait, matched across ranks. Torch-free.

A collective's kernel (NCCL's) starts on a rank once that rank's stream reaches it and ends on every
rank at about the same moment, once the last rank has arrived and the data has moved: a rank that
arrives early spins in the kernel, waiting. So the same collective on every rank of a window — the
k-th collective kernel of each stream in order, the ranks' windows taking the same steps — took on
the rank that arrived last only its *transfer*; on every other rank its transfer plus its *wait*.
A collective's transfer is its shortest kernel among the ranks; each rank's wait, its kernel less
that. (AMD's TraceLens splits communication time from synchronisation skew the same way, by the
last rank's arrival; here without a common clock, so ranks on other hosts match as well.)

What the step loses to communication is the transfer that no computation hides: the last
``transfer`` µs of each collective's kernel (the data moves once all have arrived), less the parts
in which a computation kernel ran. The rest of a collective's exposed time is waiting for the rank
that arrives last — a straggler, or ranks taking turns (jitter) — and is said as that, not as
communication. Each collective's bytes give its bus bandwidth (nccl-tests' convention: an
all-reduce moves 2(n-1)/n of its buffer over each link, an all-gather or reduce-scatter (n-1)/n):
the kernel's, where the trace says them; else the job's calls over the window, as gpudash's hooks
sized them, over the matched kernels' transfer.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from gpudash.engine.collectives import Collective

BUS_FACTOR = {"all-reduce": lambda n: 2 * (n - 1) / n, "all-gather": lambda n: (n - 1) / n}
BUS_FACTOR["reduce-scatter"] = BUS_FACTOR["all-gather"]
MIN_BANDWIDTH_BYTES = 1 << 20  # collectives this large or larger give the bus bandwidth (small ones: latency)


LAST_SHARE = 0.75  # of the ranks' wait, the share spent waiting for one rank: it is the one they wait for


@dataclass(frozen=True)
class RankComm:
    """One rank's collectives in a window matched across the ranks, ms a step: their transfer and
    its exposed part, their wait and its exposed part, each kind's exposed transfer; and of the
    world's, the rank the others wait for (None: they take turns), the bus bandwidth (GB/s, median
    over the large collectives; None: their bytes not in the trace) and the collectives matched."""

    transfer_ms: float
    transfer_exposed_ms: float
    wait_ms: float
    wait_exposed_ms: float
    kinds_exposed_ms: dict[str, float] = field(default_factory=dict)
    last_rank: int | None = None
    busbw_gbps: float | None = None
    matched: int = 0


def match(per_rank: Mapping[int, Sequence[Collective]]) -> list[dict[int, Collective]]:
    """The same collective on every rank: the k-th of each stream, streams paired in the order of
    their first collective (each rank's process group streams have their own ids)."""
    by_stream = {rank: _streams(found) for rank, found in per_rank.items()}
    if not by_stream or any(not streams for streams in by_stream.values()):
        return []
    width = min(len(streams) for streams in by_stream.values())
    out: list[dict[int, Collective]] = []
    for s in range(width):
        count = min(len(streams[s]) for streams in by_stream.values())
        for k in range(count):
            group = {rank: streams[s][k] for rank, streams in by_stream.items()}
            if len({c.kind for c in group.values()}) == 1:  # the same collective, else the windows differ
                out.append(group)
    return out


def split(
    per_rank: Mapping[int, Sequence[Collective]], steps: int, sizes: Mapping[str, tuple[int, int]] | None = None
) -> dict[int, RankComm]:
    """Each rank's transfer and wait over a window of ``steps`` steps on every rank; {} with fewer
    than two ranks or nothing matched. ``sizes``: the window's collectives as the job called them,
    (calls, bytes) by kind — their bus bandwidth where the trace's kernels do not say their bytes."""
    groups = match(per_rank) if len(per_rank) >= 2 else []
    if not groups:
        return {}
    n, per_step = len(per_rank), 1.0 / (1000.0 * max(1, steps))
    sums = {rank: [0.0, 0.0, 0.0, 0.0] for rank in per_rank}  # transfer, exposed transfer, wait, exposed wait
    kinds: dict[int, dict[str, float]] = {rank: {} for rank in per_rank}
    waited_for: dict[int, float] = dict.fromkeys(per_rank, 0.0)  # the others' wait for each rank, µs
    bandwidths: list[float] = []
    for group in groups:
        transfer = min(c.dur for c in group.values())
        waited_for[min(group, key=lambda r: group[r].dur)] += sum(c.dur - transfer for c in group.values())
        for rank, c in group.items():
            exposed = c.exposed_within(transfer)
            uncovered = sum(b - a for a, b in c.uncovered)
            s = sums[rank]
            s[0], s[1] = s[0] + transfer, s[1] + exposed
            s[2], s[3] = s[2] + c.dur - transfer, s[3] + max(0.0, uncovered - exposed)
            kinds[rank][c.kind] = kinds[rank].get(c.kind, 0.0) + exposed
        first = next(iter(group.values()))
        factor = BUS_FACTOR.get(first.kind)
        if factor is not None and first.nbytes and first.nbytes >= MIN_BANDWIDTH_BYTES and transfer > 0:
            bandwidths.append(first.nbytes * factor(n) / (transfer * 1e3))  # bytes/µs → GB/s
    total_wait = sum(waited_for.values())
    top = max(waited_for, key=lambda r: waited_for[r])
    last = top if total_wait > 0 and waited_for[top] >= LAST_SHARE * total_wait else None
    busbw = statistics.median(bandwidths) if bandwidths else called_bandwidth(groups, n, sizes or {})
    return {
        rank: RankComm(
            s[0] * per_step,
            s[1] * per_step,
            s[2] * per_step,
            s[3] * per_step,
            {kind: us * per_step for kind, us in kinds[rank].items() if us > 0},
            last,
            busbw,
            len(groups),
        )
        for rank, s in sums.items()
    }


def called_bandwidth(
    groups: Sequence[dict[int, Collective]], n: int, sizes: Mapping[str, tuple[int, int]]
) -> float | None:
    """The bus bandwidth of the kind that moved the most bytes, from the bytes the job's calls gave and
    the matched kernels' transfer: all of that kind's bytes over all of its transfer, where the window
    holds as many of its kernels as the job made calls (else None: the two do not describe the same)."""
    best: tuple[int, float] | None = None
    for kind, (calls, nbytes) in sizes.items():
        factor = BUS_FACTOR.get(kind)
        matched = [min(c.dur for c in group.values()) for group in groups if next(iter(group.values())).kind == kind]
        if factor is None or len(matched) != calls or nbytes < MIN_BANDWIDTH_BYTES * calls or sum(matched) <= 0:
            continue
        gbps = nbytes * factor(n) / (sum(matched) * 1e3)  # bytes/µs → GB/s
        if best is None or nbytes > best[0]:
            best = (nbytes, gbps)
    return best[1] if best is not None else None


def _streams(found: Sequence[Collective]) -> list[list[Collective]]:
    """The collectives by stream, in time order; streams in the order of their first collective."""
    streams: dict[int, list[Collective]] = {}
    for c in sorted(found, key=lambda c: c.start):
        streams.setdefault(c.stream, []).append(c)
    return list(streams.values())
