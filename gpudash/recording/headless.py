"""Headless recording (``gpudash --record PATH``): the loop that runs a workload and writes it to CSV.

Never imports textual (nor torch: the workload runs in the child). The rows and the
metadata are ``gpudash.recording.record.CsvRecorder``'s; what it says on stderr (events, progress
lines, the last line) is ``gpudash.recording.headless_report``'s; the signals are caught by
``gpudash.recording.interrupt.Interrupted``.

Nothing is written before the workload has started: the CSV and its metadata are created at
its "started" event (what came before is held and written first). A run that ends before that
leaves no empty CSV/JSON behind: a refusal of its first configuration (a batch that would not
fit) is one ``gpudash: error:`` line and exit 2, and the log goes too; a crash keeps the log,
which holds the traceback, and names it.

Exit status (``ExitCode``): OK when done, FAILED when the workload or writing the CSV failed,
USAGE when the CSV cannot be created or the workload refused its first configuration,
INTERRUPTED after SIGINT or SIGTERM. On the first signal the child is asked to stop and the CSV
is closed intact; a second Ctrl-C stops waiting for the child.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpudash.core.controls import PERIODIC_STEPS
from gpudash.core.protocol import (
    DIAGNOSIS,
    MEMORY,
    MEMORY_PEAK,
    NOT_RESPONDING,
    NVML_LOST,
    Diagnose,
    Event,
    EventKind,
    ExitCode,
    GpuSample,
    MemoryPeak,
    Message,
    RunConfig,
    TraceWindow,
)
from gpudash.recording.headless_report import describe_event, progress_line, report_end, say
from gpudash.recording.interrupt import Interrupted
from gpudash.recording.line_writers import RecordWriteError
from gpudash.recording.metadata import run_metadata
from gpudash.recording.record import CsvRecorder

if TYPE_CHECKING:  # pragma: no cover
    from gpudash.recording.session_api import RecordedSession

POLL_S = 0.05  # how often the record loop polls the session
PROGRESS_EVERY_S = 10.0  # a progress line on stderr this often (unless quiet)


def default_log_path(path: str | os.PathLike[str]) -> str | Path | None:
    """The child's log beside the CSV (``run.csv`` → ``run.log``); none for stdout."""
    if str(path) == "-":
        return None
    return Path(path).with_suffix(".log") if Path(path).suffix.lower() == ".csv" else f"{path}.log"


# -- the recording -----------------------------------------------------------------------------------
@dataclass
class HeadlessRecording:
    """One headless run: the session's messages into the recorder until it ends, and how it
    ended (``status`` for the metadata and stderr, ``code`` the exit status).

    ``open_recorder`` creates the CSV and its metadata; it is called at the workload's "started"
    event, and until then messages are held (the events, and only the newest GPU sample: all a
    row joins), so a run that never starts leaves no files behind."""

    config: RunConfig
    session: RecordedSession
    open_recorder: Callable[[], CsvRecorder]
    path: str | os.PathLike[str]
    duration_s: float | None = None
    quiet: bool = False
    launch_said: bool = False  # what is recorded and where was said as the job started (record of a job)
    trace_every_s: float | None = None  # a profiler window this often (TraceWindow), from the start
    trace_steps: int = PERIODIC_STEPS
    diagnose_after_s: float | None = None  # one diagnosis window (Diagnose) this long after the start
    stop_after_diagnosis: bool = False  # ``gpudash diagnose``: the run ends with its diagnosis
    memory_peak: bool = False  # ``gpudash diagnose --memory``: the allocator's history asked for (MemoryPeak)
    stop_note: str = ""  # said when the run ends with its diagnosis, before the workload is stopped
    progress_every_s: float = PROGRESS_EVERY_S  # a progress line this often, unless quiet
    status: str = "done"
    code: ExitCode = ExitCode.OK
    recorder: CsvRecorder | None = None  # None until the workload has started
    failure: Event | None = field(default=None, repr=False)  # the "crashed" event, when one came
    _held: list[Message] = field(default_factory=list, repr=False)  # messages before it started
    _started_at: float | None = field(default=None, repr=False)  # when the workload started (monotonic)
    _unsaid: list[str] = field(default_factory=list, repr=False)  # phases' lines before the start, said after it
    _memory_said: str = field(default="", repr=False)  # the latest memory line said (the end's, the same: not again)
    started_s: float | None = field(default=None, repr=False)  # ... in the run's seconds (its STARTED event's)
    _next_trace: float | None = field(default=None, repr=False)
    _next_progress: float | None = field(default=None, repr=False)
    _diagnosis_asked: bool = field(default=False, repr=False)
    diagnoses: list[Event] = field(default_factory=list)  # the diagnosis events (measured or error)
    memory_peaks: list[Event] = field(default_factory=list)  # the MemoryPeak's answers (measured or error)

    def run(self, interrupted: Interrupted) -> None:
        """Start, record until the run ends, stop; the CSV is closed whatever happens."""
        try:
            self.session.start()
            self._record(interrupted)
            self._stop()
        except RecordWriteError as exc:
            say(f"error: {exc.strerror or exc}")
            self.status, self.code = f"write failed: {exc.strerror or exc}", ExitCode.FAILED
        except KeyboardInterrupt:  # a second Ctrl-C (only one is raised)
            if self.code != ExitCode.INTERRUPTED:
                self.status, self.code = "interrupted", ExitCode.INTERRUPTED
        finally:
            if interrupted.signal == signal.SIGINT and self.recorder is None and self.code == ExitCode.FAILED:
                # a Ctrl-C reaches the workload's process group too: one that was starting ended by it
                self.status, self.code, self.failure = "interrupted", ExitCode.INTERRUPTED, None
            self._close(interrupted)

    def report(self, ended_by_itself: bool = False) -> None:
        """The last line on stderr: the failure, or (unless quiet) what was recorded
        (``headless_report.report_end``; ``ended_by_itself``: a user's job that failed on its own)."""
        report_end(self, ended_by_itself)

    # -- internals ------------------------------------------------------------------------------------
    def _on_message(self, msg: Message) -> None:
        """Record ``msg``, or hold it until the workload has started (then create the files)."""
        if self.recorder is None and isinstance(msg, Event) and msg.kind == EventKind.STARTED:
            try:
                self.recorder = self.open_recorder()
            except RecordWriteError:
                raise
            except OSError as exc:  # the directory went away since the check, the disk filled up
                raise RecordWriteError(exc.errno, f"cannot write {self.path}: {exc.strerror or exc}") from exc
            held, self._held = self._held, []

            def phase(m: Message) -> bool:
                return isinstance(m, Event) and m.kind == EventKind.PHASE

            for old in held:  # as they came, but a job's phases (an evaluation that ended as it started): after it
                if not phase(old):
                    self.recorder.on_message(old)
            self.recorder.on_message(msg)
            for old in held:
                if phase(old):
                    self.recorder.on_message(old)
            return
        if self.recorder is not None:
            self.recorder.on_message(msg)
        elif isinstance(msg, GpuSample) and self._held and isinstance(self._held[-1], GpuSample):
            self._held[-1] = msg  # a row joins only the newest GPU sample
        else:
            self._held.append(msg)

    def _note_gpu(self) -> None:
        if self.recorder is None:
            return  # the metadata is made from the session's GPU info when the files are created
        info = self.session.gpu_info
        self.recorder.metadata.update(
            gpu_name=info.name,
            gpu_names=list(info.names),
            gpu_index=info.index,
            driver=info.driver,
            nvml_unavailable=info.unavailable,
            gpm_unavailable=info.gpm_unavailable,
        )
        self.recorder.write_metadata()

    def _announce_start(self) -> None:
        if not self.quiet:
            info = self.session.gpu_info
            gpu = f"GPU {info.name}" if info.available else f"no GPU telemetry ({info.unavailable})"
            log = f"; workload log: {self.session.log_path}" if self.session.log_path else ""
            if self.launch_said:  # what and where said at the launch: the GPU now
                say(f"its first step: {gpu}{log}")
            else:
                say(f"recording {self.config.workload} to {self.path}; {gpu}{log}")

    def _record(self, interrupted: Interrupted) -> None:
        """Poll and write until the workload ends or fails, a signal comes, or time is up."""
        while True:
            for msg in self.session.poll():  # a diagnosis judged by its source, a window's bandwidth weighed
                self._on_message(msg)
                if isinstance(msg, Event):
                    self._on_event(msg)
                    if msg.kind in (EventKind.MEASURED, EventKind.ERROR) and msg.what in (DIAGNOSIS, MEMORY_PEAK):
                        (self.diagnoses if msg.what == DIAGNOSIS else self.memory_peaks).append(msg)
            if self.code == ExitCode.FAILED or (self.session.finished and not self._reading_memory()):
                return
            outcome = interrupted.outcome()
            if outcome is not None:
                self.status, self.code = outcome
                return
            if self._time_is_up():
                return
            if self.stop_after_diagnosis and (self.diagnoses or self.memory_peaks):
                if self.stop_note:
                    say(self.stop_note)
                return
            self._maybe_trace()
            self._maybe_diagnose()
            self._maybe_progress()
            time.sleep(POLL_S)

    def _reading_memory(self) -> bool:
        """``diagnose --memory``'s answer is being read though the job has ended (a short job)."""
        peaks = getattr(self.session, "peaks", None)
        return self.memory_peak and not self.memory_peaks and peaks is not None and bool(peaks.reading)

    def _maybe_diagnose(self) -> None:
        """Ask for the diagnosis window (or the allocator's history) once, ``diagnose_after_s`` seconds
        after the start."""
        asked = self.diagnose_after_s is not None or self.memory_peak
        if self._started_at is None or self._diagnosis_asked or not asked:
            return
        if time.monotonic() >= self._started_at + (self.diagnose_after_s or 0.0):  # a job's hooks wait for step 4
            self.session.send(MemoryPeak() if self.memory_peak else Diagnose())
            self._diagnosis_asked = True

    def _maybe_trace(self) -> None:
        """Ask for a profiler window every ``trace_every_s`` seconds of the run."""
        if self.trace_every_s is None or self._started_at is None:
            return
        now = time.monotonic()
        if self._next_trace is None:
            self._next_trace = self._started_at + self.trace_every_s
        if now >= self._next_trace:
            self.session.send(TraceWindow(self.trace_steps, host_ops=False))
            self._next_trace = now + self.trace_every_s

    def _maybe_progress(self) -> None:
        """Say how the run is going every ``progress_every_s`` seconds once the workload runs."""
        if self.quiet or self._started_at is None:
            return
        now = time.monotonic()
        if self._next_progress is None:
            self._next_progress = self._started_at + self.progress_every_s
        if now >= self._next_progress:
            recorder = self.recorder
            assert recorder is not None  # opened on the STARTED event, before _started_at was set
            say(progress_line(recorder.last_sample, recorder.current_segment, now - self._started_at, self.duration_s))
            self._next_progress = now + self.progress_every_s

    def _on_event(self, e: Event) -> None:
        before_start = self.recorder is None
        if e.kind == EventKind.STARTED:
            self._announce_start()
        unsaid = self.quiet or (before_start and e.kind == EventKind.CRASHED)  # a failure before the start: the report
        if e.what == MEMORY:  # the end's memory, as said before: recorded, not said again
            unsaid, self._memory_said = unsaid or e.message == self._memory_said, e.message
        if not unsaid and (line := describe_event(e)):
            if before_start and e.kind == EventKind.PHASE:
                self._unsaid.append(line)  # said after the start's lines, as it is recorded
            else:
                say(line)
        if e.kind == EventKind.STARTED:
            for line in self._unsaid:
                say(line)
            self._unsaid = []
        if e.kind == EventKind.STARTED:
            self._started_at = time.monotonic()
            self.started_s = e.time_s
            self._note_gpu()
        elif e.kind == EventKind.CRASHED:
            self.failure = self.failure or e
            self.status, self.code = f"workload failed: {e.message}", ExitCode.FAILED
        elif e.kind == EventKind.ERROR and e.what == NOT_RESPONDING:  # hung: stopped (terminated) next
            self.status, self.code = f"workload failed: {e.message}", ExitCode.FAILED
        elif e.kind == EventKind.ERROR and e.what == NVML_LOST:  # the recording goes on without GPU columns
            self._note_gpu()
        elif e.kind == EventKind.STOPPED:
            self.status = "done"

    def _time_is_up(self) -> bool:
        started, duration = self._started_at, self.duration_s
        return started is not None and duration is not None and time.monotonic() - started >= duration

    def _stop(self) -> None:
        """Stop the child and record its last messages (a crash while stopping is a failure)."""
        self.session.stop()
        for msg in self.session.poll():
            self._on_message(msg)
            if isinstance(msg, Event) and msg.kind == EventKind.CRASHED:
                self.failure = self.failure or msg
                if self.code == ExitCode.OK:
                    self.status, self.code = f"workload failed: {msg.message}", ExitCode.FAILED

    def _close(self, interrupted: Interrupted) -> None:
        try:  # after a second Ctrl-C: terminate the child now, don't wait again
            self.session.stop(timeout=interrupted.stop_timeout)
        except KeyboardInterrupt:  # the second Ctrl-C came while stopping here
            self.status, self.code = "interrupted", ExitCode.INTERRUPTED
            self.session.stop(timeout=0)
        if self.recorder is not None:
            steps = getattr(self.recorder.last_sample, "steps", 0)
            self.recorder.close(status=self.status, exit_code=int(self.code), steps=steps)


def new_recording(
    config: RunConfig,
    session: RecordedSession,
    path: str | os.PathLike[str],
    meta_path: str | os.PathLike[str] | None,
    meta_extra: dict[str, Any],
    **options: Any,
) -> HeadlessRecording:
    """A headless recording of ``session`` to ``path`` (NVML opened first: the CSV's header has
    columns for each GPU watched); ``options``: HeadlessRecording's own (duration_s, quiet, …; a
    ``progress_every_s`` of None is the default)."""
    if options.get("progress_every_s") is None:
        options.pop("progress_every_s", None)
    session.sampler.open()

    def open_recorder() -> CsvRecorder:
        return CsvRecorder(path, run_metadata(config, session.gpu_info, **meta_extra), meta_path=meta_path)

    return HeadlessRecording(config, session, open_recorder, path=path, **options)


def run_record(
    config: RunConfig,
    path: str | os.PathLike[str],
    duration_s: float | None = None,
    steps: int | None = None,
    *,
    log_path: str | os.PathLike[str] | None = None,
    meta_path: str | os.PathLike[str] | None = None,
    recording_out: list[HeadlessRecording] | None = None,
    **options: Any,
) -> int:
    """Record a run headless; returns the exit status (an ``ExitCode``): OK done, FAILED the
    workload or writing failed, USAGE the CSV cannot be created, INTERRUPTED by SIGINT/SIGTERM.

    ``duration_s`` counts from the workload's first configuration (after torch loads);
    ``steps`` stops the child after that many steps. Neither: until interrupted. ``options``: the
    recording's own (``HeadlessRecording``: quiet, trace_every_s, trace_steps, diagnose_after_s, …).
    """
    from gpudash.host.session import EngineSession

    if steps is not None:
        config = dataclasses.replace(config, max_steps=steps)
    if log_path is None:
        log_path = default_log_path(path)
    if log_path is not None:
        try:  # a log is replaced, not appended to: it is this run's
            open(log_path, "w").close()
        except OSError as exc:
            say(f"error: cannot write {log_path}: {exc.strerror or exc}")
            return ExitCode.USAGE
    session = EngineSession(config, log_path=log_path)
    meta_extra = {"child_log": session.log_path}
    recording = new_recording(config, session, path, meta_path, meta_extra, duration_s=duration_s, **options)
    if recording_out is not None:
        recording_out.append(recording)
    with Interrupted() as interrupted:
        recording.run(interrupted)
    recording.report()
    return recording.code
