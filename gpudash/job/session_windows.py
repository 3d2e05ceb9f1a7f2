"""The profiler windows of a job's session — periodic ones (``--trace-every``, the dashboard's key)
and the diagnosis' — asked of every rank at the same step, read in the background, and turned into
"measured" events and the diagnosis' verdict; and the allocator's history on request. A part the
session (``gpudash.job.session``) holds, over the parts it shares (``SessionParts``). Torch-free."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from gpudash.boot.gpudash_boot.sync_table import SyncTable
from gpudash.core.job_settings import settings_of
from gpudash.core.protocol import DIAGNOSIS, MEMORY_PEAK, TRACE, TRAINING, WINDOWS_PACED, Diagnose, Event, EventKind
from gpudash.diagnosis.evidence import Evidence
from gpudash.diagnosis.memory_peak import PeakAnswer
from gpudash.engine.comm_split import RankComm
from gpudash.job import command as job_command
from gpudash.job.diagnosis_window import JobDiagnosis, VerdictContext, ran_evidence, verdict_event, world_view
from gpudash.job.end_at_step import agreed_step
from gpudash.job.memory_history import PeakRead, answer_lines
from gpudash.job.session_parts import SessionParts
from gpudash.job.step_record import StepRecord
from gpudash.job.traces import PERIODIC_WAIT_S, TraceRead
from gpudash.job.window_reads import WindowReads, comm_figures, comm_words, matched
from gpudash.job.worker_busy import WorkerBusy

RETAKEN = (
    "the diagnosis' profiler window had an evaluation, a checkpoint, a compile or a pause of the job's in it: "
    "taken again over the next steps"
)


class SessionWindows:
    """A session's profiler windows, its diagnosis (``diagnosis``: one under way) and the allocator's
    history; ``sites`` reads the lead rank's latest sync table (the diagnosis' evidence)."""

    def __init__(self, parts: SessionParts, sites: Callable[[], SyncTable | None]) -> None:
        self.parts = parts
        self.out = parts.out
        self.sites = sites
        self.diagnosis: JobDiagnosis | None = None
        self.window_start: float | None = None  # when the diagnosis' timed window began (the run's seconds)
        self.gathered = WindowReads()

    def take_reads(self) -> None:
        """The traces and the allocator's histories read in the background since the last poll: a
        window's once every rank's trace of it is in (or waited long enough for)."""
        for read in self.parts.traces.done():
            for window in self.gathered.add(read):
                self._window(window)
        for window in self.gathered.due():
            self._window(window)
        for peak in self.parts.peaks.done():
            self._memory_peaked(peak)

    def periodic(self, steps: int, host_ops: bool = True) -> None:
        """A periodic window asked for: taken where the last one's cost allows it, one at a time
        (``host_ops`` False: the GPU's activity alone, on CUDA)."""
        traces = self.parts.traces
        if traces.periodic_open and time.monotonic() - traces.periodic_asked_at < PERIODIC_WAIT_S:
            return  # the next waits for this one's cost
        if spaced := traces.spaced(time.monotonic()):
            self.out.note("spaced", WINDOWS_PACED, spaced)  # gpudash's own pacing, not a fault of the job's
        else:
            self._ask_trace(TRACE, steps, kernels_only=not host_ops)

    def _window(self, reads: list[TraceRead]) -> None:
        """One window's traces, every rank's: its collectives matched across them, then each read."""
        comm = matched(reads)
        for read in sorted(reads, key=lambda r: r.rank != self.parts.rank_table.lead):
            self.traced(read, comm.get(read.rank))

    def traced(self, read: TraceRead, comm: RankComm | None = None) -> None:
        """A profiler window's trace, read in the background: its figures, or why there are none
        (``comm``: its rank's collectives matched across the ranks' windows)."""
        p = self.parts
        what = DIAGNOSIS if read.purpose == DIAGNOSIS else TRACE
        diagnosed = read.purpose == DIAGNOSIS and read.rank == self._diagnosis_rank()  # the verdict's evidence
        if read.figures is None:
            self.out.error(what, read.error)
            if diagnosed:
                self._diagnosed(None)  # the untraced steps' verdict still: what was measured
            elif read.rank == p.rank_table.lead:
                p.traces.periodic_open = False
            return
        if read.note:  # a note of the trace's size, never the diagnosis' answer
            self.out.error(TRACE, f"profiler window {read.note}")
        p.world.traced(read.rank, read.exposed_ms(p.samples.median_step_s))
        if diagnosed:
            if self.diagnosis is not None and self.diagnosis.retake():
                self.out.error(TRACE, RETAKEN)
                self._ask_trace(DIAGNOSIS, self.diagnosis.steps)
                return
            self._diagnosed(read.figures, comm)
            return
        if read.rank != p.rank_table.lead or what == DIAGNOSIS:
            return  # another rank's window: its exposed all-reduce, on its rank rows
        fig, path = read.figures, read.path
        more = comm_figures(comm)
        step_s = p.samples.median_step_s
        cost, weighed = read.cost(step_s), read.weighed(step_s)
        if (slowed := read.slowdown(step_s)) is not None:
            more["trace_slowdown"] = slowed
        p.traces.cost_s, p.traces.ended_at = read.cost_s(step_s) or 0.0, time.monotonic()
        p.traces.periodic_open = False
        said = "".join(f"; {part}" for part in (weighed, cost) if part)
        message = f"{fig.summary()}{comm_words(comm)}{said} → {path}"
        note = fig.note(path, **more)
        self.out.event(EventKind.MEASURED, what=TRACE, message=message, data=note, running=p.running())

    # -- a diagnosis -------------------------------------------------------------------------------
    def diagnose(self, steps: int) -> None:
        """A diagnosis over the job's next steps, from now."""
        lead = self.parts.rank_table.lead
        self.diagnosis = JobDiagnosis(steps, time.monotonic(), rank=lead, pick=self._waited_for)
        self.diagnosis.workers = WorkerBusy(os.getpid())

    def _waited_for(self) -> int:
        """The rank a diagnosis reads: the one the world waits for, by the ranks' own work so far
        (``gpudash.ranks``), where one is named; else the lead."""
        ranks = self.parts.world.stragglers.run_verdict()
        return ranks.rank if ranks is not None and ranks.rank is not None else self.parts.rank_table.lead

    def step(self, rank: int, record: StepRecord, now: float) -> None:
        """A step of ``rank``: the diagnosis under way, if any, takes it where it reads that rank."""
        if self.diagnosis is not None:
            self._diagnosis_step(self.diagnosis, rank, record, now)

    def _diagnosis_step(self, d: JobDiagnosis, rank: int, record: StepRecord, now: float) -> None:
        begun = d.add(record, now, rank)  # the phase it enters with this step, if any
        if begun == "timed":
            self.window_start = time.monotonic() - self.parts.t0  # the steady state's NVML figures are before it
        elif begun == "traced":
            self._ask_trace(DIAGNOSIS, d.steps)

    def _diagnosis_rank(self) -> int:
        """Whose window a diagnosis' verdict reads (the lead's where none is under way)."""
        return self.diagnosis.rank if self.diagnosis is not None else self.parts.rank_table.lead

    def _diagnosed(self, fig: Any, comm: RankComm | None = None) -> None:
        d, self.diagnosis = self.diagnosis, None
        if d is not None and d.timed_evidence is not None:
            self._verdict(d.timed_evidence, fig, comm=comm, rank=d.rank, over=d.over())

    def ended(self, exit_code: int) -> None:
        """The job ended before the diagnosis' window closed: what it ran, where that is enough."""
        if self.diagnosis is None:
            return
        d, self.diagnosis = self.diagnosis, None
        if d.timed_evidence is not None:
            note = f"the job {ended_how(exit_code)} before its profiler window"
            self._verdict(d.timed_evidence, None, note=note, rank=d.rank, over=d.over())
        elif isinstance(unsaid := self.ran_diagnosis(exit_code, d.steps), str):
            self.out.error(DIAGNOSIS, unsaid)

    def ran_diagnosis(self, exit_code: int | None, steps: int = Diagnose.steps) -> Event | str:
        """The job ended before a diagnosis' window closed: the diagnosis of the steps it ran (a
        "measured" event, with no profiler window), where they are enough; else why not."""
        evidence = ran_evidence(list(self.parts.samples.ran), steps, exit_code)
        if isinstance(evidence, str):
            return evidence
        ended = ended_how(exit_code)
        note = f"over the {evidence.steps} steps it ran after its warm-up: the job {ended} before the diagnosis window"
        unsaid = "" if self.parts.rank_table.on_cuda else "; no profiler window"  # a GPU job's verdict says it
        return self._verdict(evidence, None, note=note + unsaid)

    def _verdict(
        self,
        timed: Evidence,
        fig: Any,
        note: str = "",
        comm: RankComm | None = None,
        rank: int | None = None,
        over: str = "",
    ) -> Event:
        """The diagnosis event of ``rank``'s untraced window's evidence (None: the lead's) and its
        profiler window's figures (``fig`` None: none), with what the job already does and the
        counted step's dtype."""
        p = self.parts
        count = p.samples.count
        ranks = p.world.stragglers.run_verdict()
        rank = p.rank_table.lead if rank is None else rank
        known = VerdictContext(
            dtype=(count.note().dtype or None) if count is not None else None,
            settings=settings_of(p.rank_table.lead_first.get("settings")) or None,
            sites=self.sites() if p.rank_table.on_cuda else None,
            window_start=self.window_start,
            heavy=p.watch.phases.heavy(time.monotonic()),
            comm=comm,
            compiles=p.compiles.table,
            training_s=p.watch.phases.totals(time.monotonic()).get(TRAINING, 0.0),
            steps=p.samples.steps,
            straggler=ranks.words if ranks is not None else "",
            straggler_rank=ranks.rank if ranks is not None else None,
            straggler_wait_ms=ranks.wait_of(rank) if ranks is not None else None,
            world=world_view(p.rank_table.world_size(), rank, ranks),
            over=over,
        )
        event = verdict_event(time.monotonic() - p.t0, timed, fig, known, p.running(), note)
        self.out.messages.append(event)
        return event

    def _ask_trace(self, purpose: str, steps: int, kernels_only: bool = False) -> None:
        """A window of the same steps on every rank: the lead's is the run's; the others' feed their
        rank rows (``kernels_only``: the GPU's activity alone where the job runs on CUDA)."""
        p = self.parts
        targets = [ctl for _, _, ctl in p.rank_table.targets()]  # lead first
        if not targets or not targets[0]:
            self.out.error(purpose, "no step seen yet: nothing to profile")
            return
        folder = p.config.trace_dir or os.path.join(p.channel.folder, "traces")
        request, note = p.traces.ask(purpose, steps, folder, job_command.slug(p.workload), p.rank_table.firsts)
        if note:
            self.out.error(TRACE, note)
        if kernels_only:
            request["kernels_only"] = True
        if (ranks := p.rank_table.world_size()) > 1:  # the same steps on every rank
            request["at"] = agreed_step([w.steps for w in p.samples.ranks.values()], p.samples.rate, ranks)
        if not all([p.channel.request(ctl, request) for ctl in targets if ctl]) and p.process.poll() is None:
            self.out.error(purpose, "the job's process did not take the request (its channel is closed)")
            p.traces.periodic_open = False

    # -- the allocator's history -------------------------------------------------------------------
    def ask_memory_peak(self, steps: int) -> None:
        """The lead rank's allocator recorded over ``steps`` steps, from after its activations' sample
        (the other ranks' same steps marked as gpudash's: they wait for the lead's)."""
        p = self.parts
        targets = [ctl for _, _, ctl in p.rank_table.targets()]  # lead first
        if not targets or not targets[0]:
            self.out.error(MEMORY_PEAK, "no step seen yet: nothing to record")
        elif p.peaks.busy:
            self.out.error(MEMORY_PEAK, "the allocator's history is being recorded; its answer comes after its steps")
        else:
            lead = p.samples.ranks.get(p.rank_table.lead)
            request = p.peaks.ask(steps, p.channel.folder, lead.steps if lead is not None else 0)
            if not p.channel.request(targets[0], request):
                p.peaks.pending = False
                self.out.error(MEMORY_PEAK, "the job's process did not take the request (its channel is closed)")
                return
            for ctl in targets[1:]:  # the other ranks wait for the lead's slowed steps: theirs are marked too
                if ctl:
                    p.channel.request(ctl, dict(request, mark=True))

    def _memory_peaked(self, read: PeakRead) -> None:
        """The lead's recording, read: the lines at its peak (a "measured" event), or why not."""
        p = self.parts
        if read.peak is None:
            self.out.error(MEMORY_PEAK, f"the allocator's history: {read.error}")
            return
        lines = answer_lines(read, p.samples.median_step_s)
        memory = p.memory.figures.line() if p.memory.figures is not None else ""
        message = f"{read.peak.summary()}; {read.cost(p.samples.median_step_s)}"
        answer = PeakAnswer(read.peak, tuple(lines), memory)
        self.out.event(EventKind.MEASURED, what=MEMORY_PEAK, message=message, data=answer)


def ended_how(exit_code: int | None) -> str:
    """ "ended", or "failed (exit code N)" where it exited with an error."""
    return f"failed (exit code {exit_code})" if exit_code else "ended"
