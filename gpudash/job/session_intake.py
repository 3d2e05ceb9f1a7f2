"""What a job's hooks send its session (``gpudash.job.session``), each message taken by its kind: a
process's start and hello, a rank's first step, its step records, the sync table, a profiler
window's trace and the allocator's history written, the model FLOPs, an out-of-memory error, what
the memory holds, a note, a phase, a thread's stacks, dynamo's compiles and graph breaks. What the
run says of them goes into the session's outgoing messages (``SessionParts.out``). Torch-free."""

from __future__ import annotations

import json
import time
from typing import Any

from gpudash.boot.gpudash_boot import wire
from gpudash.boot.gpudash_boot.sync_table import SyncTable
from gpudash.core.compile_table import COMPILE_SUMMARY
from gpudash.core.lenient import int_or
from gpudash.core.protocol import FLOPS, PROCESSES, STEPS_COUNTED, Event, EventKind, SyncSites
from gpudash.engine.model_flops import ModelCount
from gpudash.job.mfu import cost, job_count, missing
from gpudash.job.session_parts import SessionParts
from gpudash.job.session_windows import SessionWindows
from gpudash.job.started import counted_words

HOOKS_OFF = "the job's hooks are off: "  # the note of hooks that turned themselves off (and why)


class SessionIntake:
    """``on_message`` for each message of the hooks, with what the session keeps of them: the first
    step's time, the lead's sync table, each rank's FLOPs count, an out-of-memory error, why the
    hooks went off."""

    def __init__(self, parts: SessionParts, windows: SessionWindows) -> None:
        self.parts = parts
        self.out = parts.out
        self.windows = windows  # the lead rank's steps go to a diagnosis under way
        self.first_step_at: float | None = None  # (monotonic) the first step any rank said
        self.sites: SyncTable | None = None  # the lead rank's latest sync table
        self.flops: dict[int, dict[str, Any]] = {}  # rank -> its hooks' model FLOPs count (or why none)
        self.flops_said = False
        self.oom: dict[str, Any] | None = None  # the job died of an out-of-memory error: where, with what
        self.hooks_off: tuple[str, int] | None = None  # why the job's hooks went off, and the steps seen by then
        self.compiled: list[Event] = []  # their events before the run started

    def on_message(self, m: dict[str, Any], now: float) -> None:
        """One message of the job's hooks, received at ``now`` (monotonic)."""
        p = self.parts
        kind = m.get("k")
        rank = int_or(m.get("rank"), 0)
        lead = rank == p.rank_table.lead
        if kind == wire.PROC:  # a process of the job, as it starts: its group ended with the job's
            p.process.add_group(int_or(m.get("pgid"), 0))
        elif kind == wire.HELLO:
            p.rank_table.hello(m)
            p.process.add_group(int_or(m.get("pgid"), 0))
            p.world.hello(m)
        elif kind == wire.FIRST:
            self._first(m, rank, now)
        elif kind == wire.STEPS:
            self._on_steps(rank, int_or(m.get("pid"), -1), m.get("s") or [], now)
        elif kind == wire.SITES and lead:
            self._on_sites(m)
        elif kind == wire.TRACE:
            p.traces.received(m)
        elif kind == wire.MEMPEAK and lead:
            p.peaks.received(m)
        elif kind == wire.FLOPS:
            self.flops[rank] = m
            self.say_flops()
        elif kind == wire.OOM and self.oom is None:  # the first rank to run out: its line, its memory
            self.oom = {**m, "world": p.rank_table.world_size()}
        elif kind == wire.MEM and lead:
            p.memory.received(m)
            if p.started and (said := p.memory.event(now - p.t0, *p.peak_batch())) is not None:
                self.out.messages.append(said)
        elif kind == wire.NOTE:
            self._note(str(m.get("text", "")))
        elif kind == wire.COMPILE and lead:  # said once the run has started, in their order
            self.compiled += p.compiles.events(m, now - p.t0)
            if p.started:
                self.out.messages += self.compiled
                self.compiled = []
        elif kind == wire.COUNTING and lead:
            self._counting(m)
        elif kind in (wire.PHASE, wire.STACKS, wire.WORKER):
            if kind == wire.PHASE:  # its times on gpudash's clock
                offset = p.step_intake.offset(rank)
                m = {**m, **{k: m[k] + offset for k in ("t0", "t1") if isinstance(m.get(k), (int, float))}}
            p.watch.on_message(kind, m, lead)

    def _first(self, m: dict[str, Any], rank: int, now: float) -> None:
        """A process's first step: its rank's, its clock's offset, the world it names."""
        p = self.parts
        p.rank_table.first(rank, p.world.first(m))
        p.step_intake.first(m, rank, int_or(m.get("pid"), 0), now)
        p.samples.world_size = max(p.samples.world_size, int_or(m.get("world"), 1))
        if self.first_step_at is None:
            self.first_step_at = now

    def _counting(self, m: dict[str, Any]) -> None:
        """The lead rank's steps are counted another way from a step on (an optimizer after steps by hand)."""
        now, before = counted_words(str(m.get("counted", ""))), counted_words(str(m.get("before", "")))
        if now:
            said = f"steps: {now} from step {int_or(m.get('step'), 0)}" + (f" (before it: {before})" if before else "")
            self.out.event(EventKind.MEASURED, what=STEPS_COUNTED, message=said)

    def _note(self, text: str) -> None:
        """A note of the hooks' (said as an error event): the first that they went off, kept."""
        if text.startswith(HOOKS_OFF) and self.hooks_off is None:
            self.hooks_off = (text.removeprefix(HOOKS_OFF), self.parts.samples.steps)
        self.out.error("job", text)

    def _on_steps(self, rank: int, pid: int, raw: list[Any], now: float) -> None:
        p = self.parts
        lead = rank == p.rank_table.lead
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
        details = {"processes": json.dumps(steps.as_list()), "steps_combined": steps.combined()}
        self.out.event(EventKind.MEASURED, what=PROCESSES, message=message, details=details)

    def _on_sites(self, m: dict[str, Any]) -> None:
        try:
            self.sites = table = SyncTable.from_dict(m.get("table") or {})
        except (TypeError, ValueError, KeyError):
            return
        p = self.parts
        if p.started:
            when, counted = time.monotonic() - p.t0, str(m.get("not_counted") or "")
            run = (p.workload, p.variant, p.batch_size(), "none")
            self.out.messages.append(SyncSites(when, *run, table=table, not_counted=counted))

    def started(self) -> None:
        """The run has started: the sync table, the compiles and the FLOPs count heard before it, said now."""
        if self.sites is not None:
            self._on_sites({"table": self.sites.as_dict()})
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
        details = {**count.details, **cost(m or {})}  # and what the count cost the job
        self.out.event(EventKind.MEASURED, what=FLOPS, message=count.message, details=details)

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
