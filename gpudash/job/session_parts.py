"""The parts of a job's session (``gpudash.job.session``) that its intake of the hooks' messages, its
profiler windows and its end share: made once with the session, never replaced. Among them the
session's outgoing messages (``SessionOut``: what its next poll hands out, and the events it says)
and the run's configuration as the job shows it (its workload, variant, batch and device).
Torch-free."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from gpudash.core.compile_intake import CompileIntake
from gpudash.core.protocol import Event, EventKind, Message, RunConfig
from gpudash.core.running import Running
from gpudash.job.channel import HostChannel
from gpudash.job.launch import JobProcess
from gpudash.job.memory import JobMemory
from gpudash.job.memory_history import JobMemoryPeaks
from gpudash.job.phase_watch import PhaseWatch
from gpudash.job.step_intake import StepIntake
from gpudash.job.steps import JobSamples
from gpudash.job.traces import JobTraces
from gpudash.ranks.table import RankTable
from gpudash.ranks.world import JobWorld


class SessionOut:
    """The messages a session's next ``poll()`` hands out, and the events said into them."""

    def __init__(self, t0: float) -> None:
        self.t0 = t0
        self.messages: list[Message] = []
        self.told: set[str] = set()  # the notes said once (``tell``)

    def event(self, kind: EventKind, **kw: Any) -> Event:
        """An event now, among the messages to send (returned too)."""
        event = Event(time_s=time.monotonic() - self.t0, kind=kind, **kw)
        self.messages.append(event)
        return event

    def error(self, what: str, message: str) -> None:
        self.event(EventKind.ERROR, what=what, message=message)

    def tell(self, key: str, message: str) -> None:
        """A note of the job's (an error event), said once for ``key``."""
        if key not in self.told:
            self.told.add(key)
            self.error("job", message)

    def note(self, key: str, what: str, message: str) -> None:
        """A measured fact of gpudash's own about the run (a "measured" event), said once for ``key``."""
        if key not in self.told:
            self.told.add(key)
            self.event(EventKind.MEASURED, what=what, message=message)

    def take(self) -> list[Message]:
        """The messages gathered since the last take."""
        messages, self.messages = self.messages, []
        return messages


@dataclass
class SessionParts:
    """What a job's session is made of, shared by its parts; ``started``: its "started" event is said."""

    config: RunConfig
    t0: float
    workload: str
    variant: str
    channel: HostChannel
    process: JobProcess
    samples: JobSamples
    rank_table: RankTable  # each process's hello, each rank's first step, the lead
    step_intake: StepIntake  # each process's step records, checked
    watch: PhaseWatch  # phases, goodput, stalls
    world: JobWorld  # where the ranks run, their GPUs, windows, straggler
    traces: JobTraces  # profiler windows asked of the lead process, read in the background
    memory: JobMemory  # what the lead rank's memory holds, by kind
    peaks: JobMemoryPeaks  # the allocator's history of a few steps, on request
    out: SessionOut
    started: bool = False
    compiles: CompileIntake = field(default_factory=CompileIntake)  # the lead rank's compiles, graph breaks

    def rank_batch(self) -> tuple[int, int]:
        """The lead rank's batch (samples a step), and the job's ranks."""
        rank = self.samples.ranks.get(self.rank_table.lead)
        return (rank.batch_size if rank is not None else 0), max(1, self.rank_table.world_size())

    def peak_batch(self) -> tuple[int, int]:
        """The lead rank's largest batch (samples a step; its usual one before a second step), and
        the job's ranks: the batch its memory's peak came at where batches vary (a last, smaller
        batch of an epoch, a job that varies them)."""
        batch, ranks = self.rank_batch()
        rank = self.samples.ranks.get(self.rank_table.lead)
        return max(batch, rank.largest if rank is not None else 0), ranks

    def batch_size(self) -> int:
        return self.rank_batch()[0] * self.samples.world_size

    def running(self, batch: int | None = None) -> Running:
        """The run's configuration as the job shows it (``batch``: a rank's, where known)."""
        world = self.samples.world_size
        return Running(
            self.workload,
            self.variant,
            self.batch_size() if batch is None else batch * world,
            device=str(self.rank_table.lead_first.get("device", "")),
            world_size=world,
        )
