"""What a job's hooks send its session (``gpudash.job.session``), each message taken by its kind: a
process's start and hello, a rank's first step, its step records, the sync table, a profiler
window's trace and the allocator's history written, the model FLOPs, an out-of-memory error, what
the memory holds, a note, a phase, a thread's stacks, dynamo's compiles and graph breaks. What the
run says of them goes into the session's outgoing messages (``SessionParts.out``). Torch-free."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpudash.boot.gpudash_boot import wire
from gpudash.boot.gpudash_boot.sync_table import SyncTable
from gpudash.core.compile_table import COMPILE_SUMMARY
from gpudash.core.lenient import int_or
from gpudash.core.protocol import FLOPS, PROCESSES, STEPS_COUNTED, Event, EventKind, SyncSites
from gpudash.core.run_facts import RunFacts
from gpudash.engine.model_flops import ModelCount
from gpudash.job.mfu import cost, job_count, missing
from gpudash.job.session_parts import SessionParts
from gpudash.job.session_windows import SessionWindows
from gpudash.job.started import counted_words

HOOKS_OFF = "the job's hooks are off: "  # the note of hooks that turned themselves off (and why)


@dataclass(frozen=True)
class Received:
    """A message of the hooks as received: itself, its rank, whether that is the lead, when (monotonic)."""

    m: dict[str, Any]
    rank: int
    lead: bool
    now: float


class SessionIntake:
    """``on_message`` for each message of the hooks, with what the session keeps of them: the first
    step's time, the lead's sync table, each rank's FLOPs count, an out-of-memory error, why the
    hooks went off."""

    def __init__(self, parts: SessionParts, windows: SessionWindows) -> None:
        self.parts = parts
        self.out = parts.out
        self.windows = windows  # the lead rank's steps go to a diagnosis under way
        self.first_step_at: float | None = None  # (monotonic) the first step any rank said
        self.sites: SyncTable | None = None  # the lead rank's latest sync table ...
        self.sites_not_counted = ""  # ... and what of the job's syncs it does not count
        self.flops: dict[int, dict[str, Any]] = {}  # rank -> its hooks' model FLOPs count (or why none)
        self.flops_said = False
        self.oom: dict[str, Any] | None = None  # the job died of an out-of-memory error: where, with what
        self.hooks_off: tuple[str, int] | None = None  # why the job's hooks went off, and the steps seen by then
        self.compiled: list[Event] = []  # their events before the run started

    def on_message(self, m: dict[str, Any], now: float) -> None:
        """One message of the job's hooks, received at ``now`` (monotonic): its kind's handler's
        (``HANDLERS``; a kind marked for the lead rank alone is dropped from another, an unknown kind
        from a later hooks' version is dropped)."""
        kind = m.get("k")
        rank = int_or(m.get("rank"), 0)
        lead = rank == self.parts.rank_table.lead
        entry = HANDLERS.get(kind) if isinstance(kind, str) else None
        if entry is not None and (lead or not entry[1]):
            entry[0](self, Received(m, rank, lead, now))

    def _proc(self, r: Received) -> None:  # a process of the job, as it starts: its group ends with the job's
        self.parts.process.add_group(int_or(r.m.get("pgid"), 0))

    def _hello(self, r: Received) -> None:
        p = self.parts
        p.rank_table.hello(r.m)
        p.process.add_group(int_or(r.m.get("pgid"), 0))
        p.world.hello(r.m)

    def _flops(self, r: Received) -> None:
        self.flops[r.rank] = r.m
        self.say_flops()

    def _oom(self, r: Received) -> None:  # the first rank to run out: its line, its memory
        if self.oom is None:
            self.oom = {**r.m, "world": self.parts.rank_table.world_size()}

    def _memory(self, r: Received) -> None:
        p = self.parts
        p.memory.received(r.m)
        if p.started and (said := p.memory.event(r.now - p.t0, *p.peak_batch())) is not None:
            self.out.messages.append(said)

    def _compile(self, r: Received) -> None:  # said once the run has started, in their order
        p = self.parts
        self.compiled += p.compiles.events(r.m, r.now - p.t0)
        if p.started:
            self.out.messages += self.compiled
            self.compiled = []

    def _watched(self, r: Received) -> None:
        """A phase (its times on gpudash's clock), a thread's stacks, a DataLoader worker's socket."""
        m = r.m
        if m.get("k") == wire.PHASE:
            offset = self.parts.step_intake.offset(r.rank)
            m = {**m, **{k: m[k] + offset for k in ("t0", "t1") if isinstance(m.get(k), (int, float))}}
        self.parts.watch.on_message(str(m.get("k")), m, r.lead)

    def _first(self, r: Received) -> None:
        """A process's first step: its rank's, its clock's offset, the world it names."""
        m, rank, now, p = r.m, r.rank, r.now, self.parts
        p.rank_table.first(rank, p.world.first(m))
        p.step_intake.first(m, rank, int_or(m.get("pid"), 0), now)
        p.samples.world_size = max(p.samples.world_size, int_or(m.get("world"), 1))
        if self.first_step_at is None:
            self.first_step_at = now

    def _counting(self, r: Received) -> None:
        """The lead rank's steps are counted another way from a step on (an optimizer after steps by hand)."""
        m = r.m
        now, before = counted_words(str(m.get("counted", ""))), counted_words(str(m.get("before", "")))
        if now:
            said = f"steps: {now} from step {int_or(m.get('step'), 0)}" + (f" (before it: {before})" if before else "")
            self.out.event(EventKind.MEASURED, what=STEPS_COUNTED, message=said)

    def _note(self, r: Received) -> None:
        """A note of the hooks' (said as an error event): the first that they went off, kept."""
        text = str(r.m.get("text", ""))
        if text.startswith(HOOKS_OFF) and self.hooks_off is None:
            self.hooks_off = (text.removeprefix(HOOKS_OFF), self.parts.samples.steps)
        self.out.error("job", text)

    def _on_steps(self, r: Received) -> None:
        p = self.parts
        rank, lead, now = r.rank, r.lead, r.now
        pid, raw = int_or(r.m.get("pid"), -1), r.m.get("s") or []
        limit = p.config.max_steps
        for record in p.step_intake.records(rank, pid, raw, now):
            if limit is not None and record.step > limit:
                continue  # --steps: the job is being stopped; its later steps are not this run's
            if lead:
                record = p.watch.step(record)  # noqa: PLW2901 - after a stall its seconds were the stall's
            p.samples.add(rank, record)
            self.windows.step(rank, record, now)  # a diagnosis reads the lead's, or the rank the world waits for
        while p.step_intake.joined:
            self.processes_said(p.step_intake.joined.pop(0))

    def processes_said(self, message: str) -> None:
        """How several processes' steps of a rank count (run.json's ``processes``, ``steps_combined``)."""
        steps = self.parts.step_intake
        facts = RunFacts.of({"processes": steps.as_list(), "steps_combined": steps.combined()})
        self.out.event(EventKind.MEASURED, what=PROCESSES, message=message, data=facts)

    def _on_sites(self, r: Received) -> None:
        try:
            self.sites = SyncTable.from_dict(r.m.get("table") or {})
        except (TypeError, ValueError, KeyError):
            return
        self.sites_not_counted = str(r.m.get("not_counted") or "")
        if self.parts.started:
            self._say_sites(self.sites)

    def _say_sites(self, table: SyncTable) -> None:
        """The lead rank's sync table, said to the run."""
        p = self.parts
        run = (p.workload, p.variant, p.batch_size(), "none")
        when = time.monotonic() - p.t0
        self.out.messages.append(SyncSites(when, *run, table=table, not_counted=self.sites_not_counted))

    def started(self) -> None:
        """The run has started: the sync table, the compiles and the FLOPs count heard before it, said now."""
        if self.sites is not None:
            self._say_sites(self.sites)
        self.out.messages += self.compiled
        self.compiled = []
        self.say_flops()

    def say_flops(self, final: bool = False) -> None:
        """Once started: the lead rank's count into every sample, and the "flops" event saying what was
        counted or why MFU is blank (``final``: the job has ended, and no count came: why)."""
        p = self.parts
        m = self.flops.get(p.rank_table.lead)
        if self.flops_said or not p.started or (m is None and not final):
            return
        count: ModelCount = missing(p.samples.steps) if m is None else job_count(m, p.config.peak_tflops)
        self.flops_said = True
        if count.flops_per_step is not None:
            p.samples.count = count
        note = count.note(**cost(m or {}))  # and what the count cost the job
        self.out.event(EventKind.MEASURED, what=FLOPS, message=count.message, data=note)

    def ended(self) -> None:
        """The job has ended: how several processes' steps counted, the FLOPs count or why none, and
        what it compiled in one line."""
        self.out.messages += self.compiled
        self.compiled = []
        if self.parts.compiles.table:
            message = self.parts.compiles.table.summary() + " (each in run.json's compile)"
            self.out.event(EventKind.MEASURED, what=COMPILE_SUMMARY, message=message)
        if (n := len(self.parts.step_intake.as_list())) > 1:
            self.processes_said(
                f"steps of {n} processes, counted {self.parts.step_intake.combined() or 'one process a rank'}"
            )
        if self.parts.started:
            self.say_flops(final=True)


# each kind of the hooks' messages: its handler, and whether it is the lead rank's alone
HANDLERS: dict[str, tuple[Callable[[SessionIntake, Received], None], bool]] = {
    wire.PROC: (SessionIntake._proc, False),
    wire.HELLO: (SessionIntake._hello, False),
    wire.FIRST: (SessionIntake._first, False),
    wire.STEPS: (SessionIntake._on_steps, False),
    wire.SITES: (SessionIntake._on_sites, True),
    wire.TRACE: (lambda intake, r: intake.parts.traces.received(r.m), False),
    wire.MEMPEAK: (lambda intake, r: intake.parts.peaks.received(r.m), True),
    wire.FLOPS: (SessionIntake._flops, False),
    wire.OOM: (SessionIntake._oom, False),
    wire.MEM: (SessionIntake._memory, True),
    wire.NOTE: (SessionIntake._note, False),
    wire.COMPILE: (SessionIntake._compile, True),
    wire.COUNTING: (SessionIntake._counting, True),
    wire.PHASE: (SessionIntake._watched, False),
    wire.STACKS: (SessionIntake._watched, False),
    wire.WORKER: (SessionIntake._watched, False),
}
