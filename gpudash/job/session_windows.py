"""The profiler windows of a job's session — periodic ones (``--trace-every``, the dashboard's key)
and the diagnosis' — asked of every rank at the same step, read in the background, and turned into
"measured" events and the diagnosis' verdict. A part of ``JobSession`` (``gpudash.job.session``),
which owns the state it reads. Torch-free."""

from __future__ import annotations

import json
import os
import time
from typing import Any

from gpudash.core.protocol import DIAGNOSIS, MEMORY_PEAK, Diagnose, Event, EventKind, Message, RunConfig
from gpudash.core.sync_sites import SyncTable
from gpudash.diagnosis.evidence import Evidence
from gpudash.job import command as job_command
from gpudash.job.channel import HostChannel
from gpudash.job.diagnosis import JobDiagnosis, VerdictContext, ran_evidence, verdict_event
from gpudash.job.ending import agreed_step
from gpudash.job.launch import JobProcess
from gpudash.job.memory import JobMemory
from gpudash.job.memory_history import JobMemoryPeaks, PeakRead, answer_lines
from gpudash.job.phase_watch import PhaseWatch
from gpudash.job.steps import JobSamples, StepRecord
from gpudash.job.traces import PERIODIC_WAIT_S, JobTraces, TraceRead
from gpudash.ranks.table import RankTable
from gpudash.ranks.world import JobWorld


class SessionWindows:
    """The windows' part of ``JobSession``: the attributes below are the session's."""

    config: RunConfig
    t0: float
    workload: str
    channel: HostChannel
    process: JobProcess
    samples: JobSamples
    rank_table: RankTable
    world: JobWorld
    watch: PhaseWatch
    traces: JobTraces
    memory: JobMemory
    peaks: JobMemoryPeaks
    diagnosis: JobDiagnosis | None
    exit_code: int | None
    _window_start: float | None
    _sites: SyncTable | None
    _pending: list[Message]

    def _config_details(self, batch: int | None = None) -> dict[str, str]:
        raise NotImplementedError  # the session's

    def _tell(self, key: str, message: str) -> None:
        raise NotImplementedError  # the session's

    def _error(self, what: str, message: str) -> None:
        raise NotImplementedError  # the session's

    def _event(self, kind: EventKind, **kw: Any) -> None:
        raise NotImplementedError  # the session's

    def _periodic_window(self, steps: int) -> None:
        """A periodic window asked for: taken where the last one's cost allows it, one at a time."""
        if self.traces.periodic_open and time.monotonic() - self.traces.periodic_asked_at < PERIODIC_WAIT_S:
            return  # the next waits for this one's cost
        if spaced := self.traces.spaced(time.monotonic()):
            self._tell("spaced", spaced)
        else:
            self._ask_trace("trace", steps)

    def _traced(self, read: TraceRead) -> None:
        """A profiler window's trace, read in the background: its figures, or why there are none."""
        what = DIAGNOSIS if read.purpose == DIAGNOSIS else "trace"
        if read.figures is None:
            self._error(what, read.error)
            if read.purpose != DIAGNOSIS and read.rank == self.rank_table.lead:
                self.traces.periodic_open = False
            return
        if read.note:  # a note of the trace's size, never the diagnosis' answer
            self._error("trace", f"profiler window {read.note}")
        self.world.traced(read.rank, read.exposed_ms(self.samples.median_step_s))
        if read.rank != self.rank_table.lead:
            return  # another rank's window: its exposed all-reduce, on its rank rows
        if what == DIAGNOSIS:
            self._diagnosed(read.figures)
            return
        fig, path = read.figures, read.path
        details = {**self._config_details(), **fig.details(), "trace_path": path}
        cost = read.cost(self.samples.median_step_s)
        self.traces.cost_s, self.traces.ended_at = read.cost_s(self.samples.median_step_s) or 0.0, time.monotonic()
        self.traces.periodic_open = False
        message = f"{fig.summary()}" + (f"; {cost}" if cost else "") + f" → {path}"
        self._event(EventKind.MEASURED, what="trace", message=message, details=details)

    # -- a diagnosis -------------------------------------------------------------------------------
    def _diagnosis_step(self, d: JobDiagnosis, record: StepRecord, now: float) -> None:
        begun = d.add(record, now)  # the phase it enters with this step, if any
        if begun == "timed":
            self._window_start = time.monotonic() - self.t0  # the steady state's NVML figures are before it
        elif begun == "traced":
            self._ask_trace(DIAGNOSIS, d.steps)
        elif begun == "done":
            self._diagnosed(None)

    def _diagnosed(self, fig: Any) -> None:
        d, self.diagnosis = self.diagnosis, None
        if d is not None and d.timed_evidence is not None:
            self._verdict(d.timed_evidence, fig)

    def ran_diagnosis(self, steps: int = Diagnose.steps) -> Event | str:
        """The job ended before a diagnosis' window closed: the diagnosis of the steps it ran (a
        "measured" event, with no profiler window), where they are enough; else why not."""
        evidence = ran_evidence(list(self.samples.ran), steps, self.exit_code)
        if isinstance(evidence, str):
            return evidence
        note = f"over the {evidence.steps} steps it ran after its warm-up: the job ended before the diagnosis window"
        return self._verdict(evidence, None, note=note + ("; no profiler window" if self.rank_table.on_cuda else ""))

    def _verdict(self, timed: Evidence, fig: Any, note: str = "") -> Event:
        """The diagnosis event of the untraced window's evidence and the profiler window's figures
        (``fig`` None: none), with what the job already does and the counted step's dtype."""
        count = self.samples.count
        known = VerdictContext(
            dtype=(count.details.get("dtype") or None) if count is not None else None,
            settings=str(self.rank_table.lead_first.get("settings") or "") or None,
            sites=self._sites if self.rank_table.on_cuda else None,
            window_start=self._window_start,
            heavy=self.watch.phases.heavy(time.monotonic()),
        )
        if (ranks := self.world.stragglers.run_verdict()) is not None:
            note = "; ".join(filter(None, (note, ranks.words)))
        event = verdict_event(time.monotonic() - self.t0, timed, fig, known, self._config_details(), note)
        self._pending.append(event)
        return event

    def _ask_trace(self, purpose: str, steps: int) -> None:
        """A window of the same steps on every rank: the lead's is the run's; the others' feed their rank rows."""
        targets = [ctl for _, _, ctl in self.rank_table.targets()]  # lead first
        if not targets or not targets[0]:
            self._error(purpose, "no optimizer step seen yet: nothing to profile")
            return
        folder = self.config.trace_dir or os.path.join(self.channel.folder, "traces")
        request, note = self.traces.ask(purpose, steps, folder, job_command.slug(self.workload), self.rank_table.firsts)
        if note:
            self._error("trace", note)
        if (ranks := self.rank_table.world_size()) > 1:  # the same steps on every rank
            request["at"] = agreed_step([w.steps for w in self.samples.ranks.values()], self.samples.rate, ranks)
        if not all([self.channel.request(ctl, request) for ctl in targets if ctl]) and self.process.poll() is None:
            self._error(purpose, "the job's process did not take the request (its channel is closed)")
            self.traces.periodic_open = False

    # -- the allocator's history -------------------------------------------------------------------
    def _ask_memory_peak(self, steps: int) -> None:
        """The lead rank's allocator recorded over ``steps`` steps, from after its activations' sample
        (the other ranks' same steps marked as gpudash's: they wait for the lead's)."""
        targets = [ctl for _, _, ctl in self.rank_table.targets()]  # lead first
        if not targets or not targets[0]:
            self._error(MEMORY_PEAK, "no optimizer step seen yet: nothing to record")
        elif self.peaks.busy:
            self._error(MEMORY_PEAK, "the allocator's history is being recorded; its answer comes after its steps")
        else:
            lead = self.samples.ranks.get(self.rank_table.lead)
            request = self.peaks.ask(steps, self.channel.folder, lead.steps if lead is not None else 0)
            if not self.channel.request(targets[0], request):
                self.peaks.pending = False
                self._error(MEMORY_PEAK, "the job's process did not take the request (its channel is closed)")
                return
            for ctl in targets[1:]:  # the other ranks wait for the lead's slowed steps: theirs are marked too
                if ctl:
                    self.channel.request(ctl, dict(request, mark=True))

    def _memory_peaked(self, read: PeakRead) -> None:
        """The lead's recording, read: the lines at its peak (a "measured" event), or why not."""
        if read.peak is None:
            self._error(MEMORY_PEAK, f"the allocator's history: {read.error}")
            return
        lines = answer_lines(read, self.samples.median_step_s)
        memory = self.memory.figures.line() if self.memory.figures is not None else ""
        details = {"memory_peak": json.dumps(read.peak.as_dict()), "lines": "\n".join(lines), "memory": memory}
        message = f"{read.peak.summary()}; {read.cost(self.samples.median_step_s)}"
        self._event(EventKind.MEASURED, what=MEMORY_PEAK, message=message, details=details)
