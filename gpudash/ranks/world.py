"""Where a data-parallel job's ranks run, and each rank's figures a window, for the recording.

Each rank's hello names its global rank, its node (torchrun's ``GROUP_RANK``), its host and the
run's rendezvous id (``TORCHELASTIC_RUN_ID``). A job that spans machines runs one gpudash per
node; each says once, in a "measured" event whose ``what`` is ``WORLD``, which part of which
run it sees and where its clock's zero is in Unix time, so that ``gpudash report`` (and
``replay``) can join the nodes' recordings into one world on one clock. Every closed window gives
each rank's ``RankSample`` (the CSV's ``rank`` rows), with its node and the exposed all-reduce of
its latest profiler window. The event also maps each rank to the NVML index of its GPU
(``rank_gpus``: "0:0,1:1", from the GPU UUID of its first step), so a node's per-GPU columns
give each rank's GPU figures. Torch-free.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from gpudash.core.lenient import int_or_none
from gpudash.core.protocol import WORLD, Event, EventKind, Message, RankSample
from gpudash.core.textfmt import strip_controls
from gpudash.core.world_event import WorldFacts
from gpudash.ranks.watch import StragglerWatch


class ClosedWindows(Protocol):
    """What ``closed`` reads of a job's windows (``gpudash.job.steps.JobSamples``)."""

    world_size: int
    ranks: dict[int, Any]
    new_rank_samples: list[RankSample]
    windows_closed: int
    input_shares: dict[int, float]
    own_work: dict[int, tuple[list[float], list[float]]]


@dataclass(frozen=True)
class RankPlace:
    """Where one rank runs: what its hello said."""

    rank: int
    node: int | None
    host: str
    run_id: str


class JobWorld:
    """The places of a job's ranks (from their hellos) and the exposed all-reduce of each rank's
    latest profiler window; ``t0``: the session's clock zero (monotonic)."""

    def __init__(self, t0: float, gpu_index: Callable[[str], int | None] | None = None) -> None:
        self.t0 = t0
        self.places: dict[int, RankPlace] = {}
        self.exposed_ms: dict[int, float] = {}
        self.gpus: dict[int, int] = {}  # each rank's GPU, by the NVML index gpudash samples it at
        self._gpu_index = gpu_index
        self._told: tuple[frozenset[int], frozenset[tuple[int, int]]] = (frozenset(), frozenset())
        self.stragglers = StragglerWatch()  # the rank the others wait for
        self._windows_seen = 0

    def hello(self, m: dict[str, Any]) -> None:
        """A process's hello: where its rank runs (a hello without a run id: not torchrun's)."""
        rank = int_or_none(m.get("rank"))
        if rank is None or rank < 0:
            return
        host = strip_controls(str(m.get("host") or ""))[:200]
        run_id = strip_controls(str(m.get("run_id") or ""))[:200]
        self.places[rank] = RankPlace(rank, int_or_none(m.get("node")), host, run_id)

    def first(self, m: dict[str, Any]) -> dict[str, Any]:
        """A rank's first step (``m``, returned): the GPU it runs on, where this machine has it."""
        rank, uuid = int_or_none(m.get("rank")), str(m.get("gpu_uuid") or "")
        index = self._gpu_index(uuid) if self._gpu_index is not None and uuid else None
        if rank is not None and index is not None:
            self.gpus[rank] = index
        return m

    def traced(self, rank: int, exposed_ms: float | None) -> None:
        """A profiler window of ``rank``: its exposed all-reduce a step (None: no collective in it)."""
        if exposed_ms is not None:
            self.exposed_ms[rank] = exposed_ms

    def event(self, time_s: float, world_size: int) -> Event | None:
        """The ``WORLD`` event, when a torchrun job's ranks here are known and not told yet."""
        here = frozenset(r for r, p in self.places.items() if p.run_id)
        told = (here, frozenset(self.gpus.items()))
        if not here or told == self._told:
            return None  # (told again when a rank's GPU becomes known)
        self._told = told
        first = self.places[min(here)]
        facts = WorldFacts(
            run_id=first.run_id,
            clock_unix=round(time.time() - (time.monotonic() - self.t0), 3),
            node="" if first.node is None else str(first.node),
            host=first.host,
            ranks=tuple(sorted(here)),
            world_size=world_size,
            rank_gpus=tuple(sorted((r, i) for r, i in self.gpus.items() if r in here)),
        )
        return Event(
            time_s,
            EventKind.MEASURED,
            what=WORLD,
            before=facts.node,
            after=facts.run_id,
            message=facts.message(),
            data=facts,
        )

    def closed(self, samples: ClosedWindows, time_s: float) -> list[Message]:
        """After ``samples`` closed windows: the world event (once), each rank's windows, and the
        straggler they show (a "measured" event of ``what`` "ranks", live)."""
        out: list[Message] = []
        if told := self.event(time_s, max(samples.world_size, len(samples.ranks))):
            out.append(told)
        out.extend(self.windows(samples.new_rank_samples))
        samples.new_rank_samples = []
        if samples.windows_closed > self._windows_seen and (
            straggler := self.stragglers.window(samples.input_shares, samples.own_work)
        ):
            out.append(Event(time_s, EventKind.MEASURED, what="ranks", message=straggler))
        self._windows_seen = samples.windows_closed
        return out

    def verdict_event(self, time_s: float) -> Event | None:
        """The run's straggler verdict over all its steps (a "measured" event of ``what`` "ranks"),
        where two ranks or more have their own work timed."""
        verdict = self.stragglers.run_verdict()
        if verdict is None:
            return None
        details = {"straggler_rank": "" if verdict.rank is None else str(verdict.rank)}
        for work in verdict.ranks:
            details[f"rank{work.rank}_own_ms"] = f"{work.own_ms:.4g}"
            details[f"rank{work.rank}_comm_ms"] = f"{work.comm_ms:.4g}"
        return Event(time_s, EventKind.MEASURED, what="ranks", message=verdict.words, details=details)

    def windows(self, closed: list[RankSample]) -> list[RankSample]:
        """The ranks' closed windows with their node and exposed all-reduce."""
        out = []
        for r in closed:
            place = self.places.get(r.rank)
            node = place.node if place is not None else None
            out.append(dataclasses.replace(r, node=node, allreduce_exposed_ms=self.exposed_ms.get(r.rank)))
        return out
