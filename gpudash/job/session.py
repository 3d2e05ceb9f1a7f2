"""The user's own job as a run: ``JobSession`` is the ``EngineSource`` of ``gpudash -- CMD``. It
starts the job (``gpudash.job.launch``) with a channel, turns what its hooks send into the messages
every run has (``Sample`` and ``RankSample`` windows, ``SyncSites``, "started", "measured" and ending
events) and adds NVML's figures. A job's settings are its own arguments: a control that changes a
family is answered with an error event; a profiler window, a diagnosis and stopping it are not.

This module is the front: the source's calls, the run's start and its windows as they close. Its
parts: the intake of the hooks' messages by kind (``session_intake``), the profiler windows and the
diagnosis (``session_windows``), the end's events (``session_end``), over what they share
(``session_parts``). Torch-free."""

from __future__ import annotations

import collections
import dataclasses
import errno
import threading
import time
from collections.abc import Callable
from typing import Any

from gpudash.boot.gpudash_boot import wire
from gpudash.core.proctree import children
from gpudash.core.protocol import (
    STEPS_COUNTED,
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
    TraceWindow,
)
from gpudash.diagnosis.telemetry import RecentTicks
from gpudash.host.devices import cuda_index_hint
from gpudash.host.noise import NoiseProbe
from gpudash.host.nvml import NvmlSampler
from gpudash.job import command as job_command
from gpudash.job.channel import HostChannel
from gpudash.job.end_at_step import plan, wait_for_exit
from gpudash.job.launch import STOP_GRACE_S, JobProcess, job_env
from gpudash.job.memory import JobMemory
from gpudash.job.memory_history import JobMemoryPeaks
from gpudash.job.output import read_output
from gpudash.job.phase_watch import PhaseWatch
from gpudash.job.session_end import say_final_figures, say_how_it_ended
from gpudash.job.session_intake import SessionIntake
from gpudash.job.session_parts import SessionOut, SessionParts
from gpudash.job.session_windows import SessionWindows
from gpudash.job.started import quiet_note, start_note
from gpudash.job.step_intake import StepIntake
from gpudash.job.steps import JobSamples
from gpudash.job.suspended import JobStops
from gpudash.job.traces import JobTraces
from gpudash.ranks.table import RankTable
from gpudash.ranks.world import JobWorld

NO_HELLO_S = 15.0  # no word from the job this long after its start: say why that may be
NO_STEP_S = 60.0  # no step this long after its hello: say so, and how to mark its steps
STARTED_AFTER_STEPS = 10  # "started" once this many steps are in (the batch size known) ...
STARTED_AFTER_S = 3.0  # ... or this long after the first
BLIND_AFTER_S = 2.0  # gpudash was stopped this long (SIGSTOP, Ctrl-Z): its windows are unknown, not zero
OUTPUT_LINES = 5000  # the dashboard's log pane keeps this many of the job's lines


class JobSession:
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
        self.process = self._job_process(capture, stdout_to_stderr)
        self.sampler = sampler or NvmlSampler(
            cuda_index_hint("cuda"), config.gpu_interval_s, t0=self.t0, gpus=config.gpus
        )
        self.sampler.t0 = self.t0
        self.ticks = RecentTicks()  # a diagnosis is judged with NVML's tick from before its window
        self.samples = JobSamples(self.workload, self.variant, config.sample_interval_s, self.t0)
        self.started_event: Event | None = None  # its "started" event (for a recording's metadata)
        self.output: collections.deque[str] = collections.deque(maxlen=OUTPUT_LINES)
        # each line the job writes (captured runs) grows the version; the line it is writing; gpudash went, it runs
        self.output_version, self.partial, self.left = 0, "", False
        self.exit_code: int | None = None  # the job's, once it has ended
        self.no_hello_s, self.no_step_s = NO_HELLO_S, NO_STEP_S  # when a quiet job gets its note
        self.noise = NoiseProbe()  # what else competes with the job's processes: stamped on each Sample
        self._ended = self._nvml_started = False
        self.start_error: str | None = None  # why the command could not be run at all
        self.on_launch: Callable[[], None] | None = None  # called once the command runs (record's first line)
        self.out = SessionOut(self.t0)  # what the next poll hands out
        self.intake = StepIntake(self.t0, lambda text: self.out.error("job", text))  # each process's records, checked
        self.watch = PhaseWatch(self.t0, self.samples, self.channel, self.out.event)  # phases, goodput, stalls
        self.phases = self.watch.phases
        self.watch.stall_min_s = config.stall_after_s
        self.stops = JobStops(self.process, self.watch, lambda text: self.out.error("job", text))  # Ctrl-Z, SIGTTOU
        self._last_poll = self.t0
        self.interrupted_by_user: Callable[[], bool] = lambda: False  # a Ctrl-C's stop stays a signal, the user's
        self.parts = SessionParts(
            config=config,
            t0=self.t0,
            workload=self.workload,
            variant=self.variant,
            channel=self.channel,
            process=self.process,
            samples=self.samples,
            rank_table=RankTable(),
            step_intake=self.intake,
            watch=self.watch,
            world=JobWorld(self.t0, self.sampler.index_of),
            traces=JobTraces(),
            memory=JobMemory(),
            peaks=JobMemoryPeaks(),
            out=self.out,
        )
        self.windows = SessionWindows(self.parts, lambda: self.from_hooks.sites)  # profiler windows, diagnosis
        self.from_hooks = SessionIntake(self.parts, self.windows)  # the hooks' messages, by kind

    def _job_process(self, capture: bool, stdout_to_stderr: bool) -> JobProcess:
        """The job's command with its environment: the hooks, the channel, ``--set``, ``--steps``."""
        config = self.config
        env = job_env(
            self.channel.path,
            sites=config.sync_sites,
            unbuffered=capture,
            job_set=config.job_set,
            end_after=config.max_steps,
        )
        litter = [self.channel.folder]
        return JobProcess(self.command, env, capture=capture, stdout_to_stderr=stdout_to_stderr, litter=litter)

    # -- EngineSource ------------------------------------------------------------------------------
    log_path: str | None = None  # the job's output is its own: on the terminal, or in the dashboard's pane

    @property
    def info(self) -> SourceInfo:
        return SourceInfo(started=self.started_event)

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
        self.process.on_launch = self.on_launch
        try:
            self.process.start()
        except OSError as exc:  # as a shell says it: 127 for what is not found, else 126
            found = exc.errno not in (errno.ENOENT, errno.ENOTDIR)
            why = "required file not found (its #! interpreter?)" if not found else exc.strerror or str(exc)
            self.start_error = f"cannot run {job_command.display(self.command[:1])}: {why}"
            self._end(126 if found else 127, self.start_error)
            return
        if self.process.capture_error is not None:
            self.out.error("output", self.process.capture_error)
        if self.process.output_path is not None:
            threading.Thread(target=read_output, args=(self,), name="gpudash-job-output", daemon=True).start()

    def send(self, control: Control) -> None:
        if isinstance(control, Stop):
            self.stop()
        elif isinstance(control, TraceWindow):
            self.windows.periodic(control.steps, control.host_ops)
        elif isinstance(control, Diagnose):
            self.windows.diagnose(control.steps)
        elif isinstance(control, MemoryPeak):
            self.windows.ask_memory_peak(control.steps)
        else:
            self.out.error("control", f"not for a job ({type(control).__name__}): its settings are its own arguments")

    def poll(self) -> list[Message]:
        """What the job and NVML said since the last poll, oldest first; never blocks."""
        now = time.monotonic()
        if self.stops.gpudash_was_stopped and now - self._last_poll >= BLIND_AFTER_S:  # what the job sent then
            self.samples.blind(self._last_poll, now)  # may be lost: those windows are unknown, not zero
        self.stops.gpudash_was_stopped = False
        self._last_poll = now
        for message in self.channel.receive():
            self.from_hooks.on_message(message, now)
        self.windows.take_reads()
        if not self._ended:
            self.stops.check(now)
        first_step_at = self.from_hooks.first_step_at
        if self._ended:
            pass  # nothing more comes: no window after the job's last step
        elif self.parts.started:
            self.close_windows(now)
        elif first_step_at is not None and (
            self.samples.steps >= STARTED_AFTER_STEPS or now - first_step_at >= STARTED_AFTER_S
        ):
            self._start_run()
        self._check_quiet(now)
        if self.parts.started and not self._ended:
            self.watch.check_stall(now, self.parts.rank_table.targets)
        limit = self.config.max_steps
        if limit is not None and self.samples.steps >= limit and not self._ended:
            self.stop()  # --steps: the job has made that many
        if not self._ended:
            code = self.process.poll()
            if code is not None:
                self._drain()  # its last words
                self._end(code)
        msgs = self.out.take()
        msgs.extend(self.sampler.drain())
        msgs.sort(key=lambda m: m.time_s)
        return self.ticks.through(msgs, self.sampler.info)

    def restart(self) -> None:
        self.out.error("control", "a job cannot be restarted from here: run its command again")

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
        """Every rank asked to end after the same step (``gpudash.job.end_at_step``); the job's exit
        status once it has, None where it cannot be asked or did not end in time."""
        table = self.parts.rank_table
        sockets, last_t = [ctl for _, _, ctl in table.targets()], self.samples.last_step_t
        since = None if last_t is None or self.from_hooks.hooks_off is not None else time.monotonic() - last_t
        latest = [windows.steps for windows in self.samples.ranks.values()]
        planned = plan(sockets, latest, self._steps_per_s(), table.world_size(), since)
        several = len(self.intake.as_list()) > max(1, table.stepped)  # a rank's steps of several processes
        if planned is None or several or not self._end_after(planned[0], sockets):
            return None
        code = wait_for_exit(self.process.poll, self._drain, planned[1])
        self.process.stopped_by_gpudash = self.process.stopped_by_gpudash or code is not None
        return code

    def _steps_per_s(self) -> float | None:
        """The job's pace for the step every rank ends after: its rate, or before its first window
        closes, one over its median step (a job ended early — ``--steps 30`` — still gets the
        margin its pace needs: at 3 steps, its ranks heard the request past that step, each ending
        where it was, and one left the other in a collective)."""
        if self.samples.rate is not None:
            return self.samples.rate
        median = self.samples.median_step_s
        return 1.0 / median if median else None

    def _end_after(self, step: int, sockets: list[str]) -> bool:  # False: a process could not be asked
        return all([self.channel.request(ctl, {"k": wire.END, "after": step}) for ctl in sockets]) and all(sockets)

    def _drain(self) -> None:  # what the job has said, now
        for message in self.channel.receive():
            self.from_hooks.on_message(message, time.monotonic())

    def leave_running(self) -> None:
        """gpudash goes, the job stays (``diagnose --keep-running``, the dashboard's "leave it running")."""
        self.left = True
        self.process.leave_running()
        self._ended = True
        self.sampler.stop()

    def ran_diagnosis(self, steps: int = Diagnose.steps) -> Event | str:
        """The job ended before a diagnosis' window closed: the diagnosis of the steps it ran (a
        "measured" event), where they are enough; else why not."""
        ran = self.windows.ran_diagnosis(self.exit_code, steps)
        return ran if isinstance(ran, str) else self.ticks.judged(ran)

    # -- the run: its start, its windows, its end ---------------------------------------------------
    def _start_run(self) -> None:
        parts = self.parts
        parts.started = True
        lead = parts.rank_table.lead_first
        rank = self.samples.ranks.get(parts.rank_table.lead)
        batch = rank.batch_size if rank is not None else 0
        self.samples.world_size = max(self.samples.world_size, parts.rank_table.stepped)
        running = parts.running(batch)
        note = start_note(lead, self.process.pid, self.command)
        if note.gpu_uuid:
            self.sampler.select(uuid=note.gpu_uuid)
        message = f"{job_command.display(self.command)} on {running.device}"
        self.started_event = self.out.event(
            EventKind.STARTED, message=message, details=note.details(), data=note, running=running
        )
        if note.steps:
            self.out.event(EventKind.MEASURED, what=STEPS_COUNTED, message=f"steps: {note.steps}")
        self.watch.started(compiled_s=parts.compiles.table.seconds_until(step=1))
        self.from_hooks.started()

    def close_windows(self, now: float) -> None:
        """The windows that ended by ``now``: the run's (with what the memory holds), each rank's, and
        the straggler they show."""
        self.out.messages.extend(self._stamped(self.samples.due(now)))
        self.out.messages.extend(self.parts.world.closed(self.samples, now - self.t0))

    def _stamped(self, samples: list[Sample]) -> list[Sample]:
        """``samples`` with what the lead rank's memory held as last counted (``mem_params_mib`` …),
        and what made them noisy (``Sample.noise``: the machine's load besides the job's processes)."""
        memory = self.parts.memory
        fields: dict[str, Any] = memory.figures.sample_fields() if memory.figures is not None else {}
        if samples and (noise := self._noise()):
            fields["noise"] = noise
        return [dataclasses.replace(s, **fields) for s in samples] if fields else samples

    def _noise(self) -> str:
        """``gpudash.host.noise``'s reasons now: the job's processes are its whole tree (torchrun's ranks
        run in sessions of their own, so not its process group)."""
        pid = self.process.pid
        return self.noise.read(lambda: [pid, *children(pid, recursive=True)] if pid else [], self.sampler.latest)

    def _check_quiet(self, now: float) -> None:
        """A note, once, when the job says nothing or never steps an optimizer."""
        table, limits = self.parts.rank_table, (self.no_hello_s, self.no_step_s)
        if not self._ended and (
            note := quiet_note(
                now - self.t0, bool(table.hellos), bool(table.firsts), *limits, self.parts.compiles.called
            )
        ):
            self.out.tell(*note)

    def _end(self, code: int, why: str = "") -> None:
        self._ended = True
        self.exit_code = code
        if not self.parts.started and self.from_hooks.first_step_at is not None:
            self._start_run()  # a short job: what it stepped is recorded all the same
        self.from_hooks.ended()
        if self.parts.started:
            self.out.messages.extend(self._stamped(self.samples.flush()))
            say_final_figures(self.parts)
        self.windows.ended(code)  # a diagnosis whose window had not closed: what the job ran, where that is enough
        say_how_it_ended(self.out, self.process, code, why, self.from_hooks.oom, self.interrupted_by_user())
        if self.process.stopped_by_gpudash:
            self.process.stop(grace_s=1.0)  # its group's leftovers (DataLoader workers), the reaper
        else:
            self.process.ended_by_itself()  # what it leaves running lives on, as bare
        self.channel.close()
