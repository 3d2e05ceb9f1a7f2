"""A torchrun job's "world" event as typed data (``WorldFacts``: its run, its node and host, the
ranks seen here, where its clock's zero falls in Unix time, each rank's GPU by NVML index):
``gpudash.ranks.world`` makes it and renders its message from it; ``gpudash report`` and ``replay``
read it back (``facts_of``) to join the nodes' recordings.
Ground floor: read by records and commands alike."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

from gpudash.core.events import Event

CLOCK_WORDS = "time 0 at unix"  # the world event's message says its clock's zero thus: "time 0 at unix 1764.5"
GPU_WORDS = "GPUs by rank (NVML index)"  # and each rank's GPU thus: "GPUs by rank (NVML index) 0:0 1:1"


@dataclass(frozen=True)
class WorldFacts:
    """Which part of a torchrun run a recording saw, and how its clock lines up with the others'."""

    KIND: ClassVar[str] = "world"

    run_id: str
    clock_unix: float | None  # the Unix time of the recording's time 0 (None: an old message said none)
    node: str = ""
    host: str = ""
    ranks: tuple[int, ...] = ()
    world_size: int = 0
    rank_gpus: tuple[tuple[int, int], ...] = ()  # (rank, NVML index), where known

    def message(self) -> str:
        """ "torchrun run R: node 1 (host b), ranks 2, 3 of 4; time 0 at unix 1764.5; GPUs by rank …"."""
        where = f"node {self.node or '?'}" + (f" (host {self.host})" if self.host else "")
        ranks = ", ".join(str(r) for r in self.ranks)
        clock = "?" if self.clock_unix is None else f"{self.clock_unix:.3f}"
        said = f"torchrun run {self.run_id}: {where}, ranks {ranks} of {self.world_size}; {CLOCK_WORDS} {clock}"
        return f"{said}; {gpu_words(dict(self.rank_gpus))}" if self.rank_gpus else said

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)  # (its tuples are JSON's lists)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> WorldFacts:
        clock = d.get("clock_unix")
        return cls(
            run_id=str(d["run_id"]),
            clock_unix=None if clock is None else float(clock),
            node=str(d.get("node", "")),
            host=str(d.get("host", "")),
            ranks=tuple(int(r) for r in d.get("ranks", ())),
            world_size=int(d.get("world_size", 0)),
            rank_gpus=tuple((int(r), int(i)) for r, i in d.get("rank_gpus", ())),
        )


def facts_of(event: Event) -> WorldFacts:
    """A world event's facts (its data: an older recording's are read from its words as it is
    read, ``recording.older_events``)."""
    assert isinstance(event.data, WorldFacts), f"a world event carries its facts: {event.message}"
    return event.data


def gpu_words(gpus: dict[int, int]) -> str:
    """The message's words for each rank's GPU ("GPUs by rank (NVML index) 0:0 1:1"; "" for none)."""
    return f"{GPU_WORDS} " + " ".join(f"{r}:{i}" for r, i in sorted(gpus.items())) if gpus else ""
