"""Headless recording (``gpudash --record PATH``): run a workload and write it to CSV.

Never imports textual (nor torch: the workload runs in the child). The rows and the
metadata are ``gpudash.recording.record.CsvRecorder``'s; progress lines and diagnostics go to stderr.

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
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpudash.core.protocol import (
    DIAGNOSIS,
    MEMORY_PEAK,
    NOT_RESPONDING,
    NVML_LOST,
    REFUSED,
    TRACEBACK,
    Diagnose,
    Event,
    EventKind,
    ExitCode,
    GpuSample,
    MemoryPeak,
    Message,
    RunConfig,
    Sample,
    TraceWindow,
)
from gpudash.core.textfmt import fmt_duration, fmt_needs, fmt_num
from gpudash.diagnosis.remedies import with_remedies
from gpudash.diagnosis.telemetry import RecentTicks
from gpudash.recording.record import CsvRecorder, RecordWriteError, run_metadata
from gpudash.stats.comparison import seconds_for_interval
from gpudash.stats.fmt import fmt_pm

if TYPE_CHECKING:  # pragma: no cover
    from gpudash.recording.session_api import RecordedSession
    from gpudash.stats.segments import Segment

POLL_S = 0.05  # how often the record loop polls the session
STOP_TIMEOUT_S = 10.0  # how long the child may take to stop itself
PROGRESS_EVERY_S = 10.0  # a progress line on stderr this often (unless quiet)


# -- signals and exit status -------------------------------------------------------------------------
class _Interrupted:
    """SIGINT/SIGTERM/SIGHUP → a flag the record loop checks (the CSV stays intact)."""

    def __init__(self) -> None:
        self.signal: int | None = None
        self.forced = False  # a second Ctrl-C came: terminate the child now
        self._old: dict[int, Any] = {}

    def __enter__(self) -> _Interrupted:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # SIGHUP: the terminal closed
            try:
                self._old[sig] = signal.signal(sig, self._handle)
            except ValueError:  # not the main thread
                pass
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        if self.signal is None:
            self.signal = signum
            if signum == signal.SIGINT:
                _announce("stopping after the current step (Ctrl-C again to force)")
            else:
                _announce(f"{signal.Signals(signum).name}: stopping after the current step")
        elif signum == signal.SIGINT and not self.forced:
            self.forced = True
            _announce("forced: terminating the workload now")
            raise KeyboardInterrupt  # a second Ctrl-C: stop waiting for the child
        # later signals: the child is already being terminated, and the CSV closes after it

    def __exit__(self, *exc: object) -> None:
        for sig, old in self._old.items():
            # once interrupted, gpudash is on its way out with 130: a later Ctrl-C (an impatient
            # third) must not kill it by SIGINT between the closed CSV and its last line
            late = sig == signal.SIGINT and self.signal is not None
            signal.signal(sig, signal.SIG_IGN if late else old)

    def outcome(self) -> tuple[str, ExitCode] | None:
        """(status, exit code) once a signal came; None before."""
        if self.signal is None:
            return None
        return f"interrupted by {signal.Signals(self.signal).name}", ExitCode.INTERRUPTED

    @property
    def stop_timeout(self) -> float:
        """How long to wait for the child to stop: not at all after a second Ctrl-C."""
        return 0 if self.forced else STOP_TIMEOUT_S


def _announce(text: str) -> None:
    """A line on stderr from a signal handler, at once: one ``os.write`` (``print`` could be in
    the middle of writing to the same buffered stream); a closed terminal (SIGHUP) is ignored."""
    try:
        os.write(sys.stderr.fileno(), f"gpudash: {text}\n".encode())
    except (OSError, ValueError):
        pass


def _say(text: str) -> None:
    print(f"gpudash: {text}", file=sys.stderr, flush=True)


def _describe_event(e: Event) -> str | None:
    if e.kind in (EventKind.STARTING,):
        return None
    text = f"[{e.time_s:7.1f}s] {e.kind}"
    if e.kind == EventKind.CHANGED or (e.kind == EventKind.ERROR and e.what and (e.before or e.after)):
        text += f" {e.what}: {e.before} → {e.after}"
    if e.message:
        text += f": {e.message}"
    return text


def progress_line(
    sample: Sample | None, segment: Segment | None, elapsed_s: float, duration_s: float | None = None
) -> str:
    """ "231 steps/s now · encdec/serial bs8 229.1 ± 3.2 steps/s (95% CI, 36 samples) · 00:40 elapsed of 01:00",
    then what makes the machine noisy now, when something does (" · ⚠ noisy: host load: …")."""
    now = f"{fmt_num(sample.steps_per_s)} steps/s now" if sample is not None else "no sample yet"
    estimate = segment.estimate("steps_per_s") if segment is not None else None
    if segment is None:
        mean = "warming up"
    elif estimate is None:
        mean = f"{segment.label} warming up"
    elif not estimate.has_interval:
        needs = seconds_for_interval(estimate.n_samples, sample.interval_s if sample is not None else 1.0)
        mean = f"{segment.label} {fmt_num(estimate.mean)} steps/s (too short: {fmt_needs(needs)})"
    else:
        mean = f"{segment.label} {fmt_pm(estimate)} steps/s (95% CI, {estimate.n_samples} samples)"
    elapsed = f"{fmt_duration(elapsed_s)} elapsed" + (f" of {fmt_duration(duration_s)}" if duration_s else "")
    noisy = f" · ⚠ noisy: {sample.noise}" if sample is not None and sample.noise else ""
    return f"{now} · {mean} · {elapsed}{noisy}"


def _empty(path: str) -> bool:
    """The file is empty or gone."""
    try:
        return os.path.getsize(path) == 0
    except OSError:
        return True


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _default_log_path(path: str | os.PathLike[str]) -> str | Path | None:
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
    trace_every_s: float | None = None  # a profiler window this often (TraceWindow), from the start
    trace_steps: int = 20
    diagnose_after_s: float | None = None  # one diagnosis window (Diagnose) this long after the start
    stop_after_diagnosis: bool = False  # ``gpudash diagnose``: the run ends with its diagnosis
    memory_peak: bool = False  # ``gpudash diagnose --memory``: the allocator's history asked for (MemoryPeak)
    stop_note: str = ""  # said when the run ends with its diagnosis, before the workload is stopped
    progress_every_s: float = PROGRESS_EVERY_S  # a progress line this often, unless quiet
    status: str = "done"
    code: ExitCode = ExitCode.OK
    recorder: CsvRecorder | None = None  # None until the workload has started
    _held: list[Message] = field(default_factory=list, repr=False)  # messages before it started
    _failure: Event | None = field(default=None, repr=False)  # the "crashed" event, when one came
    _started_at: float | None = field(default=None, repr=False)  # when the workload started (monotonic)
    _next_trace: float | None = field(default=None, repr=False)
    _next_progress: float | None = field(default=None, repr=False)
    _diagnosis_asked: bool = field(default=False, repr=False)
    # the latest NVML samples: a diagnosis is judged with the one from before its window
    _recent_gpu: RecentTicks = field(default_factory=RecentTicks, repr=False)
    diagnoses: list[Event] = field(default_factory=list)  # the diagnosis events (measured or error)
    memory_peaks: list[Event] = field(default_factory=list)  # the MemoryPeak's answers (measured or error)

    def run(self, interrupted: _Interrupted) -> None:
        """Start, record until the run ends, stop; the CSV is closed whatever happens."""
        try:
            self.session.start()
            self._record(interrupted)
            self._stop()
        except RecordWriteError as exc:
            _say(f"error: {exc.strerror or exc}")
            self.status, self.code = f"write failed: {exc.strerror or exc}", ExitCode.FAILED
        except KeyboardInterrupt:  # a second Ctrl-C (only one is raised)
            if self.code != ExitCode.INTERRUPTED:
                self.status, self.code = "interrupted", ExitCode.INTERRUPTED
        finally:
            if interrupted.signal == signal.SIGINT and self.recorder is None and self.code == ExitCode.FAILED:
                # a Ctrl-C reaches the workload's process group too: one that was starting ended by it
                self.status, self.code, self._failure = "interrupted", ExitCode.INTERRUPTED, None
            self._close(interrupted)

    def report(self, ended_by_itself: bool = False) -> None:
        """The last line on stderr: the failure, or (unless quiet) what was recorded.
        ``ended_by_itself``: a user's job that failed on its own after it was recorded (its exit
        code, a signal): its end, as its event says it, with what was kept, even when quiet — its
        own output says why; not gpudash's "workload failed"."""
        recorder, log_path = self.recorder, self.session.log_path or ""
        failed = self.code == ExitCode.FAILED and self.status.startswith("workload failed")
        own_end = ended_by_itself and failed and self._failure is not None
        if recorder is None:
            self._report_not_started()
        elif failed and not own_end:
            _say(f"error: {self.status}" + ("" if not log_path or log_path in self.status else f" (see {log_path})"))
        elif not self.quiet or own_end:
            if not self.quiet:
                for event in self.diagnoses:
                    _say(f"diagnosis: {event.message}")
                for line in recorder.summaries:  # each configuration's mean ± interval, as in the CSV
                    _say(line)
            where = f" in {self.path}" if recorder.path else ""
            end = self._failure.message if own_end and self._failure is not None else self.status
            _say(f"{end}: {recorder.samples} samples, {recorder.rows} rows{where}")

    # -- internals ------------------------------------------------------------------------------------
    def _report_not_started(self) -> None:
        """The one line of a run that ended before its workload started (nothing was recorded);
        the log is removed unless it holds a crash's traceback."""
        failure, log_path = self._failure, self.session.log_path or ""
        if failure is not None and failure.details.get(REFUSED):
            self.status, self.code = f"refused: {failure.message}", ExitCode.USAGE
            if failure.details.get(TRACEBACK) and not _empty(log_path):  # the user's code: its traceback stays
                _say(f"error: {failure.message} (traceback: {log_path})")
                return
            _say(f"error: {failure.message}")
            _remove(log_path)
            return
        if failure is not None or self.code == ExitCode.FAILED:
            why = failure.message if failure is not None else self.status.removeprefix("workload failed: ")
            self.code = ExitCode.FAILED
            _say(
                f"error: the workload failed before it started, nothing recorded: {why}"
                + ("" if log_path in why or _empty(log_path) else f" (see {log_path})")
            )
            if _empty(log_path):
                _remove(log_path)
            return
        if _empty(log_path):
            _remove(log_path)
        if self.code == ExitCode.INTERRUPTED or not self.quiet:
            _say(f"{self.status} before the workload started: nothing recorded")

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
            for old in held:
                self.recorder.on_message(old)
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
            _say(f"recording {self.config.workload} to {self.path}; {gpu}{log}")

    def _record(self, interrupted: _Interrupted) -> None:
        """Poll and write until the workload ends or fails, a signal comes, or time is up."""
        while True:
            for msg in self.session.poll():
                if isinstance(msg, GpuSample):
                    self._recent_gpu.add(msg)
                elif isinstance(msg, Event) and msg.what == DIAGNOSIS and msg.kind == EventKind.MEASURED:
                    msg = with_remedies(self._recent_gpu.judge(msg))  # noqa: PLW2901 - NVML's figures, remedies
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
                    _say(self.stop_note)
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
            self.session.send(TraceWindow(self.trace_steps))
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
            _say(progress_line(recorder.last_sample, recorder.current_segment, now - self._started_at, self.duration_s))
            self._next_progress = now + self.progress_every_s

    def _on_event(self, e: Event) -> None:
        before_start = self.recorder is None
        if e.kind == EventKind.STARTED:
            self._announce_start()
        if not self.quiet and not (before_start and e.kind == EventKind.CRASHED) and (line := _describe_event(e)):
            _say(line)  # a failure before the start is the report's one line
        if e.kind == EventKind.STARTED:
            self._started_at = time.monotonic()
            self._note_gpu()
        elif e.kind == EventKind.CRASHED:
            self._failure = self._failure or e
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
                self._failure = self._failure or msg
                if self.code == ExitCode.OK:
                    self.status, self.code = f"workload failed: {msg.message}", ExitCode.FAILED

    def _close(self, interrupted: _Interrupted) -> None:
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
        log_path = _default_log_path(path)
    if log_path is not None:
        try:  # a log is replaced, not appended to: it is this run's
            open(log_path, "w").close()
        except OSError as exc:
            _say(f"error: cannot write {log_path}: {exc.strerror or exc}")
            return ExitCode.USAGE
    session = EngineSession(config, log_path=log_path)
    meta_extra = {"child_log": session.log_path}
    recording = new_recording(config, session, path, meta_path, meta_extra, duration_s=duration_s, **options)
    if recording_out is not None:
        recording_out.append(recording)
    with _Interrupted() as interrupted:
        recording.run(interrupted)
    recording.report()
    return recording.code
