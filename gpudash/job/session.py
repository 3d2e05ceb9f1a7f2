"""The user's own job as a run: ``JobSession`` is the ``EngineSource`` of ``gpudash -- CMD``. It
starts the job (``gpudash.job.launch``) with a channel, turns what its hooks send into the messages
every run has (``Sample`` and ``RankSample`` windows, ``SyncSites``, "started", "measured" and ending
events) and adds NVML's figures. A job's settings are its own arguments: a control that changes a
family is answered with an error event; a profiler window, a diagnosis and stopping it are not.
Torch-free."""

from __future__ import annotations

import collections
import dataclasses
import errno
import json
import threading
import time
from collections.abc import Callable
from typing import Any

from gpudash.core.proctree import children
from gpudash.core.protocol import (
    DIAGNOSIS,
    FLOPS,
    OUT_OF_MEMORY,
    PROCESSES,
    Control,
    Diagnose,
    Event,
    EventKind,
    GpuInfo,
    MemoryPeak,
    Message,
    RunConfig,
    Sample,
    SourceInfo,
    Stop,
    SyncSites,
    TraceWindow,
)
from gpudash.core.sync_sites import SyncTable
from gpudash.diagnosis.out_of_memory import explained
from gpudash.engine.model_flops import ModelCount
from gpudash.host.devices import cuda_index_hint
from gpudash.host.noise import NoiseProbe
from gpudash.host.nvml import NvmlSampler
from gpudash.job import command as job_command
from gpudash.job.boot import gpudash_job_wire as wire
from gpudash.job.channel import HostChannel
from gpudash.job.diagnosis import JobDiagnosis
from gpudash.job.ending import plan, wait_for_exit
from gpudash.job.intake import StepIntake
from gpudash.job.launch import STOP_GRACE_S, JobProcess, job_env
from gpudash.job.memory import JobMemory
from gpudash.job.memory_history import JobMemoryPeaks
from gpudash.job.mfu import job_count, missing
from gpudash.job.output import read_output
from gpudash.job.phase_watch import PhaseWatch
from gpudash.job.session_windows import SessionWindows
from gpudash.job.started import quiet_note, started_details
from gpudash.job.steps import JobSamples
from gpudash.job.stops import JobStops
from gpudash.job.traces import JobTraces
from gpudash.ranks.table import RankTable
from gpudash.ranks.world import JobWorld

HOOKS_OFF = "the job's hooks are off: "  # the note of hooks that turned themselves off (and why)
NO_HELLO_S = 15.0  # no word from the job this long after its start: say why that may be
NO_STEP_S = 60.0  # no optimizer step this long after its hello: say so
STARTED_AFTER_STEPS = 10  # "started" once this many steps are in (the batch size known) ...
STARTED_AFTER_S = 3.0  # ... or this long after the first
BLIND_AFTER_S = 2.0  # gpudash was stopped this long (SIGSTOP, Ctrl-Z): its windows are unknown, not zero
OUTPUT_LINES = 5000  # the dashboard's log pane keeps this many of the job's lines


class JobSession(SessionWindows):
    """``EngineSource`` for a job: ``start()``, ``send()``, ``poll()``, ``stop()``."""

    def __init__(
        self,
        config: RunConfig,
        *,
        capture: bool = False,
        stdout_to_stderr: bool = False,
        sampler: NvmlSampler | None = None,
    ) -> None:
        assert config.job, "a JobSession needs RunConfig.job"
        self.config = config
        self.t0 = time.monotonic()
        self.command = list(config.job)
        self.workload, self.variant = job_command.workload_name(self.command), job_command.variant(self.command)
        self.channel = HostChannel()
        env = job_env(self.channel.path, sites=config.sync_sites, unbuffered=capture, job_set=config.job_set)
        self.process = JobProcess(
            self.command, env, capture=capture, stdout_to_stderr=stdout_to_stderr, litter=[self.channel.folder]
        )
        self.sampler = sampler or NvmlSampler(
            cuda_index_hint("cuda"), config.gpu_interval_s, t0=self.t0, gpus=config.gpus
        )
        self.sampler.t0 = self.t0
        self.samples = JobSamples(self.workload, self.variant, config.sample_interval_s, self.t0)
        self.started_details: dict[str, str] = {}
        self.output: collections.deque[str] = collections.deque(maxlen=OUTPUT_LINES)
        # each line the job writes (captured runs) grows the version; the line it is writing; gpudash went, it runs
        self.output_version, self.partial, self.left = 0, "", False
        self.exit_code: int | None = None  # the job's, once it has ended
        self.no_hello_s, self.no_step_s = NO_HELLO_S, NO_STEP_S  # when a quiet job gets its note
        self.diagnosis: JobDiagnosis | None = None
        self._window_start: float | None = None  # when the diagnosis' timed window began (the run's seconds)
        self.rank_table = RankTable()  # each process's hello, each rank's first step, the lead
        self._first_step_at: float | None = None
        self._started = False
        self._told: set[str] = set()
        self._pending: list[Message] = []
        self.noise = NoiseProbe()  # what else competes with the job's processes: stamped on each Sample
        self.traces = JobTraces()  # profiler windows asked of the lead process, read in the background
        self._ended = self._nvml_started = False
        self._sites: SyncTable | None = None
        self.start_error: str | None = None  # why the command could not be run at all
        self.hooks_off: tuple[str, int] | None = None  # why the job's hooks went off, and the steps seen by then
        self.intake = StepIntake(self.t0, lambda text: self._error("job", text))  # each process's records, checked
        self._flops: dict[int, dict[str, Any]] = {}  # rank -> its hooks' model FLOPs count (or why none)
        self._flops_said = False
        self.watch = PhaseWatch(self.t0, self.samples, self.channel, self._event)  # phases, goodput, stalls
        self.phases = self.watch.phases
        self.watch.stall_min_s = config.stall_after_s
        self.stops = JobStops(self.process, self.watch, lambda text: self._error("job", text))  # Ctrl-Z, SIGTTOU
        self._last_poll = self.t0
        self.interrupted_by_user: Callable[[], bool] = lambda: False  # a Ctrl-C's stop stays a signal, the user's
        self.world = JobWorld(self.t0, self.sampler.index_of)  # where the ranks run, their GPUs, windows, straggler
        self.memory = JobMemory()  # what the lead rank's memory holds, by kind
        self.peaks = JobMemoryPeaks()  # the allocator's history of a few steps, on request
        self.oom: dict[str, Any] | None = None  # the job died of an out-of-memory error: where, with what

    # -- EngineSource ------------------------------------------------------------------------------
    log_path: str | None = None  # the job's output is its own: on the terminal, or in the dashboard's pane

    @property
    def info(self) -> SourceInfo:
        return SourceInfo(started_details=dict(self.started_details))

    @property
    def gpu_info(self) -> GpuInfo:
        return self.sampler.info

    @property
    def alive(self) -> bool:
        return not self._ended

    @property
    def finished(self) -> bool:
        """The job has ended and ``poll()`` has said how."""
        return self._ended

    def start(self) -> None:
        """NVML, then the job; a command that cannot be run is a "crashed" event."""
        if not self._nvml_started:
            self._nvml_started = True
            self.sampler.start()
        try:
            self.process.start()
        except OSError as exc:  # as a shell says it: 127 for what is not found, else 126
            found = exc.errno not in (errno.ENOENT, errno.ENOTDIR)
            why = "required file not found (its #! interpreter?)" if not found else exc.strerror or str(exc)
            self.start_error = f"cannot run {job_command.display(self.command[:1])}: {why}"
            self._end(126 if found else 127, self.start_error)
            return
        if self.process.capture_error is not None:
            self._error("output", self.process.capture_error)
        if self.process.output_path is not None:
            threading.Thread(target=read_output, args=(self,), name="gpudash-job-output", daemon=True).start()

    def send(self, control: Control) -> None:
        if isinstance(control, Stop):
            self.stop()
        elif isinstance(control, TraceWindow):
            self._periodic_window(control.steps)
        elif isinstance(control, Diagnose):
            self.diagnosis = JobDiagnosis(control.steps, time.monotonic(), self.rank_table.on_cuda)
        elif isinstance(control, MemoryPeak):
            self._ask_memory_peak(control.steps)
        else:
            self._error("control", f"not for a job ({type(control).__name__}): its settings are its own arguments")

    def poll(self) -> list[Message]:
        """What the job and NVML said since the last poll, oldest first; never blocks."""
        now = time.monotonic()
        if self.stops.gpudash_was_stopped and now - self._last_poll >= BLIND_AFTER_S:  # what the job sent then
            self.samples.blind(self._last_poll, now)  # may be lost: those windows are unknown, not zero
        self.stops.gpudash_was_stopped = False
        self._last_poll = now
        for message in self.channel.receive():
            self._on_message(message, now)
        for read in self.traces.done():
            self._traced(read)
        for peak in self.peaks.done():
            self._memory_peaked(peak)
        if not self._ended:
            self.stops.check(now)
        if self._ended:
            pass  # nothing more comes: no window after the job's last step
        elif self._started:
            self._close_windows(now)
        elif self._first_step_at is not None and (
            self.samples.steps >= STARTED_AFTER_STEPS or now - self._first_step_at >= STARTED_AFTER_S
        ):
            self._start_run()
        self._check_quiet(now)
        if self._started and not self._ended:
            self.watch.check_stall(now, self.rank_table.targets)
        limit = self.config.max_steps
        if limit is not None and self.samples.steps >= limit and not self._ended:
            self.stop()  # --steps: the job has made that many
        if not self._ended:
            code = self.process.poll()
            if code is not None:
                self._drain()  # its last words
                self._end(code)
        msgs, self._pending = self._pending, []
        msgs.extend(self.sampler.drain())
        msgs.sort(key=lambda m: m.time_s)
        return msgs

    def restart(self) -> None:
        self._error("control", "a job cannot be restarted from here: run its command again")

    def stop(self, timeout: float = 10.0) -> None:
        """End the job (SIGINT, SIGTERM, SIGKILL), NVML and the channel. Idempotent."""
        if not self._ended:
            code = self._quiet_end() if timeout > 0 and not self.interrupted_by_user() else None
            if code is None:
                code = self.process.stop(grace_s=STOP_GRACE_S if timeout > 0 else 0.0)
            self._drain()
            self._end(code if code is not None else 0)
        self.sampler.stop()
        self._nvml_started = False

    def _quiet_end(self) -> int | None:
        """Every rank asked to end after the same step (``gpudash.job.ending``); the job's exit
        status once it has, None where it cannot be asked or did not end in time."""
        sockets, last_t = [ctl for _, _, ctl in self.rank_table.targets()], self.samples.last_step_t
        since = None if last_t is None or self.hooks_off is not None else time.monotonic() - last_t
        latest = [windows.steps for windows in self.samples.ranks.values()]
        planned = plan(sockets, latest, self.samples.rate, self.rank_table.world_size(), since)
        several = len(self.intake.as_list()) > max(1, self.rank_table.stepped)  # a rank's steps of several processes
        if planned is None or several or not self._end_after(planned[0], sockets):
            return None
        code = wait_for_exit(self.process.poll, self._drain, planned[1])
        self.process.stopped_by_gpudash = self.process.stopped_by_gpudash or code is not None
        return code

    def _end_after(self, step: int, sockets: list[str]) -> bool:  # False: a process could not be asked
        return all([self.channel.request(ctl, {"k": wire.END, "after": step}) for ctl in sockets]) and all(sockets)

    def _drain(self) -> None:  # what the job has said, now
        for message in self.channel.receive():
            self._on_message(message, time.monotonic())

    def leave_running(self) -> None:
        """gpudash goes, the job stays (``diagnose --keep-running``, the dashboard's "leave it running")."""
        self.left = True
        self.process.leave_running()
        self._ended = True
        self.sampler.stop()

    # -- the job's messages ------------------------------------------------------------------------
    def _on_message(self, m: dict[str, Any], now: float) -> None:
        kind = m.get("k")
        rank = _int(m.get("rank"), 0)
        if kind == wire.PROC:  # a process of the job, as it starts: its group ended with the job's
            self.process.add_group(_int(m.get("pgid"), 0))
        elif kind == wire.HELLO:
            self.rank_table.hello(m)
            self.process.add_group(_int(m.get("pgid"), 0))
            self.world.hello(m)
        elif kind == wire.FIRST:
            self.rank_table.first(rank, self.world.first(m))
            self.intake.first(m, rank, _int(m.get("pid"), 0), now)
            self.samples.world_size = max(self.samples.world_size, _int(m.get("world"), 1))
            if self._first_step_at is None:
                self._first_step_at = now
        elif kind == wire.STEPS:
            self._on_steps(rank, _int(m.get("pid"), -1), m.get("s") or [], now)
        elif kind == wire.SITES and rank == self.rank_table.lead:
            self._on_sites(m)
        elif kind == wire.TRACE:
            self.traces.received(m)
        elif kind == wire.MEMPEAK and rank == self.rank_table.lead:
            self.peaks.received(m)
        elif kind == wire.FLOPS:
            self._flops[rank] = m
            self._say_flops()
        elif kind == wire.OOM and self.oom is None:  # the first rank to run out: its line, its memory
            self.oom = {**m, "world": self.rank_table.world_size()}
        elif kind == wire.MEM and rank == self.rank_table.lead:
            self.memory.received(m)
            if self._started and (said := self.memory.event(now - self.t0, *self._rank_batch())) is not None:
                self._pending.append(said)
        elif kind == wire.NOTE:
            text = str(m.get("text", ""))
            if text.startswith(HOOKS_OFF) and self.hooks_off is None:
                self.hooks_off = (text.removeprefix(HOOKS_OFF), self.samples.steps)
            self._error("job", text)
        elif kind in (wire.PHASE, wire.STACKS, wire.WORKER):
            if kind == wire.PHASE:  # its times on gpudash's clock
                offset = self.intake.offset(rank)
                m = {**m, **{k: m[k] + offset for k in ("t0", "t1") if isinstance(m.get(k), (int, float))}}
            self.watch.on_message(kind, m, rank == self.rank_table.lead)

    def _on_steps(self, rank: int, pid: int, raw: list[Any], now: float) -> None:
        lead = rank == self.rank_table.lead
        limit = self.config.max_steps
        for record in self.intake.records(rank, pid, raw, now):
            if limit is not None and record.step > limit:
                continue  # --steps: the job is being stopped; its later steps are not this run's
            if lead:
                record = self.watch.step(record)  # noqa: PLW2901 - after a stall its seconds were the stall's
            self.samples.add(rank, record)
            if lead and self.diagnosis is not None:
                self._diagnosis_step(self.diagnosis, record, now)
        while self.intake.joined:
            self._processes_said(self.intake.joined.pop(0))

    def _close_windows(self, now: float) -> None:
        """The windows that ended by ``now``: the run's (with what the memory holds), each rank's, and
        the straggler they show."""
        self._pending.extend(self._with_memory(self.samples.due(now)))
        self._pending.extend(self.world.closed(self.samples, now - self.t0))

    def _with_memory(self, samples: list[Sample]) -> list[Sample]:
        """``samples`` with what the lead rank's memory held as last counted (``mem_params_mib`` …),
        and what made them noisy (``Sample.noise``: the machine's load besides the job's processes)."""
        fields: dict[str, Any] = self.memory.figures.sample_fields() if self.memory.figures is not None else {}
        if samples and (noise := self._noise()):
            fields["noise"] = noise
        return [dataclasses.replace(s, **fields) for s in samples] if fields else samples

    def _noise(self) -> str:
        """``gpudash.host.noise``'s reasons now: the job's processes are its whole tree (torchrun's ranks
        run in sessions of their own, so not its process group)."""
        pid = self.process.pid
        return self.noise.read(lambda: [pid, *children(pid, recursive=True)] if pid else [], self.sampler.latest)

    def _processes_said(self, message: str) -> None:
        """How several processes' steps of a rank count (run.json's ``processes``, ``steps_combined``)."""
        details = {"processes": json.dumps(self.intake.as_list()), "steps_combined": self.intake.combined()}
        self._event(EventKind.MEASURED, what=PROCESSES, message=message, details=details)

    def _on_sites(self, m: dict[str, Any]) -> None:
        try:
            self._sites = table = SyncTable.from_dict(m.get("table") or {})
        except (TypeError, ValueError, KeyError):
            return
        if self._started:
            when, counted = time.monotonic() - self.t0, str(m.get("not_counted") or "")
            run = (self.workload, self.variant, self._batch_size(), "none")
            self._pending.append(SyncSites(when, *run, table=table, not_counted=counted))

    def _start_run(self) -> None:
        self._started = True
        lead = self.rank_table.lead_first
        rank = self.samples.ranks.get(self.rank_table.lead)
        batch = rank.batch_size if rank is not None else 0
        self.samples.world_size = max(self.samples.world_size, self.rank_table.stepped)
        details = started_details(self._config_details(batch), lead, self.process.pid, self.command)
        self.started_details = details
        if details["gpu_uuid"]:
            self.sampler.select(uuid=details["gpu_uuid"])
        message = f"{job_command.display(self.command)} on {details['device']}"
        self._event(EventKind.STARTED, message=message, details=details)
        self.watch.started()
        if self._sites is not None:
            self._on_sites({"table": self._sites.as_dict()})
        self._say_flops()

    def _say_flops(self, final: bool = False) -> None:
        """Once started: the lead rank's count into every sample, and the "flops" event saying what was
        counted or why MFU is blank (``final``: the job has ended, and no count came: why)."""
        m = self._flops.get(self.rank_table.lead)
        if self._flops_said or not self._started or (m is None and not final):
            return
        count: ModelCount = missing(self.samples.steps) if m is None else job_count(m, self.config.peak_tflops)
        self._flops_said = True
        if count.flops_per_step is not None:
            self.samples.count = count
        self._event(EventKind.MEASURED, what=FLOPS, message=count.message, details=dict(count.details))

    def _config_details(self, batch: int | None = None) -> dict[str, str]:
        lead = self.rank_table.lead_first
        return {
            "workload": self.workload,
            "variant": self.variant,
            "batch_size": str(self._batch_size() if batch is None else batch * self.samples.world_size),
            "device": str(lead.get("device", "")),
            "knobs": "none",
            "world_size": str(self.samples.world_size),
        }

    def _batch_size(self) -> int:
        return self._rank_batch()[0] * self.samples.world_size

    def _rank_batch(self) -> tuple[int, int]:
        """The lead rank's batch (samples a step), and the job's ranks."""
        rank = self.samples.ranks.get(self.rank_table.lead)
        return (rank.batch_size if rank is not None else 0), max(1, self.rank_table.world_size())

    def _check_quiet(self, now: float) -> None:
        """A note, once, when the job says nothing or never steps an optimizer."""
        table, limits = self.rank_table, (self.no_hello_s, self.no_step_s)
        if not self._ended and (note := quiet_note(now - self.t0, bool(table.hellos), bool(table.firsts), *limits)):
            self._tell(*note)

    def _end(self, code: int, why: str = "") -> None:
        self._ended = True
        self.exit_code = code
        if not self._started and self._first_step_at is not None:
            self._start_run()  # a short job: what it stepped is recorded all the same
        if (n := len(self.intake.as_list())) > 1:
            self._processes_said(f"steps of {n} processes, counted {self.intake.combined() or 'one process a rank'}")
        if self._started:
            self._say_flops(final=True)
            self._pending.extend(self._with_memory(self.samples.flush()))
            self._pending.extend(self.world.closed(self.samples, time.monotonic() - self.t0))
            if (ranks := self.world.verdict_event(time.monotonic() - self.t0)) is not None:
                self._pending.append(ranks)
            if (memory := self.memory.final(time.monotonic() - self.t0, *self._rank_batch())) is not None:
                self._pending.append(memory)
            self.watch.ended(time.monotonic())
        if self.diagnosis is not None:  # the window had not closed: what the job ran, where that is enough
            d, self.diagnosis = self.diagnosis, None
            if d.timed_evidence is not None:
                self._verdict(d.timed_evidence, None, note="the job ended before its profiler window")
            elif isinstance(unsaid := self.ran_diagnosis(d.steps), str):
                self._error(DIAGNOSIS, unsaid)
        if self.oom is not None and (code != 0 or self.oom.get("thread")):  # a thread's: the job may end 0
            self._event(EventKind.ERROR, what=OUT_OF_MEMORY, message=explained(self.oom), details=_texts(self.oom))
        stopped = self.process.stopped_by_gpudash
        ctrl_c = self.process.killed_by() == "SIGINT" and self.process.terminal.job_group is not None
        if code == 0 or stopped or ctrl_c:
            how = "stopped by gpudash" if stopped else "interrupted (Ctrl-C)" if ctrl_c else "exited with code 0"
            self._event(EventKind.STOPPED, message=f"the job {how}", details={"exit_code": str(code)})
        else:
            signal_name = self.process.killed_by()
            killed = f"the job was killed by {signal_name} (exit status {code})" if signal_name else ""
            message = why or killed or f"the job exited with code {code}"
            self._event(EventKind.CRASHED, message=message, details={"exit_code": str(code)})
        if stopped:
            self.process.stop(grace_s=1.0)  # its group's leftovers (DataLoader workers), the reaper
        else:
            self.process.ended_by_itself()  # what it leaves running lives on, as bare
        self.channel.close()

    def _tell(self, key: str, message: str) -> None:
        if key not in self._told:
            self._told.add(key)
            self._error("job", message)

    def _error(self, what: str, message: str) -> None:
        self._event(EventKind.ERROR, what=what, message=message)

    def _event(self, kind: EventKind, **kw: Any) -> None:
        self._pending.append(Event(time_s=time.monotonic() - self.t0, kind=kind, **kw))


def _int(value: Any, default: int) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def _texts(m: dict[str, Any]) -> dict[str, str]:
    """A message's fields as an event's details (run.json's ``out_of_memory``)."""
    return {k: json.dumps(v) if isinstance(v, list) else str(v) for k, v in m.items() if k != "k" and v is not None}
