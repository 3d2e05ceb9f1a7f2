"""The dashboard's run controller: the one owner of run state, without Textual.

``DashController`` holds the ``DashState`` (status, what runs, series, stats), the controls
sent and pending, and the gate every control goes through (``send``). Its parts, each a job of
its own: ``requests`` (``run_requests``: a variant, a batch size, a window asked for), ``tune``
(``tune_requests``), ``knobs`` (``knob_steering``: the knobs running, asked for and refused) and
``recording`` (``dash_recording``: the ``c`` key's CSV). The Textual app renders it and forwards
keys: each user action returns the ``Notice`` to show. Blocking calls on the source (start,
restart, stop) are the app's to run in a thread; ``poll()`` never blocks.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import TYPE_CHECKING

from gpudash.core import protocol  # the controls, as protocol.SetVariant etc.
from gpudash.core.protocol import (
    DIAGNOSIS,
    ENDING_KINDS,
    NOT_RESPONDING,
    NVML_LOST,
    TRACE,
    Control,
    EngineSource,
    Event,
    EventKind,
    Message,
    Sample,
    SourceInfo,
)
from gpudash.tui import job_notices
from gpudash.tui.dash_recording import DashRecording, RecorderFactory
from gpudash.tui.knob_steering import KnobSteering
from gpudash.tui.markers import trace_line
from gpudash.tui.notices import STARTING, Notice, Severity, error, event_notice, gpm_notice, short_path, warning
from gpudash.tui.ranks_line import ranks_line
from gpudash.tui.run_requests import RunRequests
from gpudash.tui.state import DashState, Status
from gpudash.tui.tune_requests import TuneRequests
from workloads.catalog_types import FamilyInfo, WorkloadError  # torch-free
from workloads.knobs import Knobs, parse_knobs  # torch-free
from workloads.registry import family  # torch-free

if TYPE_CHECKING:
    from gpudash.core.protocol import RunConfig

MAX_SENT = 64  # controls kept in ``DashController.sent`` (the latest; a long run sends one per change)


class DashController:
    """A run (live or replayed) as the dashboard sees and steers it."""

    def __init__(
        self, source: EngineSource, *, maxlen: int = 600, recorder_factory: RecorderFactory | None = None
    ) -> None:
        self.source = source
        self.replay = source.info.replay
        self.config: RunConfig = source.config
        self.is_job = self.config.job is not None  # the user's own command (gpudash -- CMD): job_notices
        self.state = DashState(maxlen=maxlen, mode="whole" if self.replay else "window", config=self.config)
        self.sent: deque[Control] = deque(maxlen=MAX_SENT)  # the latest controls sent, oldest first
        self.pending_batch: int | None = None
        self.ready = False  # source.start() has returned
        self.pending_knobs: Knobs | None = None  # asked for, not yet answered
        self.progress: str | None = None  # a slow change under way ("compiling… 12 s")
        self.pending_trace = False  # a profiler window asked for, not yet answered
        self.pending_diagnosis = False  # a diagnosis window asked for, not yet answered
        self.hung = False  # the watchdog said the workload is not responding; nothing heard since
        self._bad_rows_told = 0
        self._notes_told = False  # the source's notes (a replay's metadata file ignored) are said once
        self._gpm_told = False  # why GPM's figures are blank is said once
        self.knobs = KnobSteering(self)
        self.requests = RunRequests(self)
        self.tune = TuneRequests(self)
        self.recording = DashRecording(self, recorder_factory)

    @property
    def info(self) -> SourceInfo:
        return self.source.info

    def family(self) -> FamilyInfo | None:
        """What runs now, as the catalog knows it (a workload of the user's own too); None: unknown."""
        try:
            return family(self.state.run.workload)
        except WorkloadError:
            return None

    # -- the source --------------------------------------------------------------------------
    def source_started(self) -> list[Notice]:
        """``source.start()`` (or restart) returned: what a replay says of itself, then drain."""
        self.ready = True
        if self.replay:
            self.config = self.source.config  # a replay knows its config once opened
            self.state.adopt_config(self.config)
        return self.poll()

    def source_failed(self, why: str) -> Notice:
        self.state.mark_failed(why)
        return Notice(why, Severity.ERROR)

    def begin_restart(self) -> Notice | None:
        """Before ``source.restart()``; a Notice (and no restart) when it makes no sense."""
        if self.replay:
            return None
        if not self.state.ended and not self.hung:
            return warning("the workload is running; restart is for after a crash or stop")
        self.hung = False
        self.state.mark_starting()
        self.ready = False
        return Notice("restarting the workload…")

    def poll(self) -> list[Notice]:
        """Everything that arrived: into the state and the recording; returns what to tell."""
        if not self.ready:
            return []
        gpu_info = self.source.gpu_info
        if gpu_info != self.state.gpu_info:
            self.state.gpu_info = gpu_info
        try:
            messages = self.source.poll()
        except Exception as exc:  # noqa: BLE001 - shown, the dashboard stays up
            what = f"reading {short_path(self.info.path or '')}" if self.replay else "reading the workload's messages"
            return [Notice(f"{what} failed: {exc}", Severity.ERROR)]
        notices = self.ingest(messages)
        if gpu_info.gpm_unavailable and not self._gpm_told:
            self._gpm_told = True
            notices.append(gpm_notice(gpu_info.gpm_unavailable))
        info = self.info
        if not self._notes_told and not info.loading:  # after a replay's rows: its last word
            self._notes_told = True
            notices += [Notice(note, Severity.WARNING, toast=True) for note in info.notes]
        bad = info.bad_rows
        if bad > self._bad_rows_told:
            self._bad_rows_told = bad
            notices.append(warning(f"replay: {bad} malformed row{'s' if bad != 1 else ''} skipped"))
        return notices

    def ingest(self, messages: Iterable[Message]) -> list[Notice]:
        notices: list[Notice] = []
        for msg in messages:
            self.state.ingest(msg)
            self._note_knobs(msg)
            if (stopped := self.recording.write(msg)) is not None:
                notices.append(stopped)
            if self.hung and _from_workload(msg):
                self.hung = False
                notices.append(Notice("the workload process is responding again"))
            if isinstance(msg, Event):
                notices.extend(self.event_notices(msg))
        return notices

    def _note_knobs(self, msg: Message) -> None:
        """The knobs running and the warm-up under way, from a sample or an event."""
        if isinstance(msg, Sample):
            self.progress = None
            return
        if not isinstance(msg, Event) or msg.kind in (EventKind.MEASURED, EventKind.SUMMARY):
            return
        if msg.kind == EventKind.PROGRESS:
            self.progress = msg.message or "warming up…"
            return
        self.progress = None
        if msg.what in ("knobs", "workload") or msg.kind in (EventKind.STARTED, EventKind.CRASHED):
            self.pending_knobs = None

    def event_notices(self, e: Event) -> list[Notice]:
        """What ``e`` settles (a batch size or a profiler window asked for; a hang) and says."""
        if e.what == "batch_size" and e.kind in (EventKind.CHANGED, EventKind.ERROR):
            self.pending_batch = None
        if (e.what == TRACE and e.kind in (EventKind.MEASURED, EventKind.ERROR)) or e.kind in ENDING_KINDS:
            self.pending_trace = False
        if (e.what == DIAGNOSIS and e.kind in (EventKind.MEASURED, EventKind.ERROR)) or e.kind in ENDING_KINDS:
            self.pending_diagnosis = False
        if e.kind == EventKind.ERROR and e.what == NOT_RESPONDING:
            self.hung = True
        live = not self.replay
        notice = job_notices.phase_notice(e, live)  # a job's, replayed too
        notice = notice or (job_notices.job_notice(e, live) if self.is_job else None)
        notice = notice or event_notice(e, self.state, live=live, applying=self.knobs.base().text())
        return [] if notice is None else [notice]

    def diagnosis_text(self) -> str | None:
        """The running configuration's diagnosis, one line (the stats panel's), or None."""
        e = self.state.last_diagnosis
        return f"diagnosis: {e.message}" if e is not None else None

    def last_trace_text(self) -> str | None:
        """The latest profiler window's figures, one line (the stats panel's), or None."""
        e = self.state.last_trace
        return f"last trace: {trace_line(e)}" if e is not None else None

    def status_text(self) -> str:
        if self.replay:
            info = self.info
            return info.loading or ("following (read-only)" if info.follow else "replay (read-only)")
        if self.progress and not self.state.ended:
            return self.progress
        if self.state.status == Status.STARTING:
            return STARTING
        if self.hung and not self.state.ended:
            return "not responding — r restarts"
        if self.state.status == Status.CRASHED:
            return "crashed" if self.is_job else "crashed — r restarts"
        return str(self.state.status)

    # -- controls ----------------------------------------------------------------------------
    def enabled(self, action: str, steers: bool) -> bool:
        """Whether an action applies now (the app's ``check_action``)."""
        if (steers and self.replay) or not self.applies(action, steers):
            return False
        if action == "restart":
            return self.state.ended or self.hung
        if action == "pause_resume":
            return not self.state.ended
        return True

    def applies(self, action: str, steers: bool) -> bool:
        """Whether an action is for this run at all: of a job's steering keys only a few are."""
        return not (self.is_job and steers and action not in job_notices.JOB_STEERS)

    def send(self, control: Control, note: str) -> Notice:
        if self.replay:
            return warning("replay: read-only")
        if self.is_job and not isinstance(control, job_notices.JOB_CONTROLS):
            return warning(job_notices.NOT_FOR_A_JOB)
        if not self.ready:
            return warning("the workload is still starting; try again in a moment")
        if self.state.ended or not self.source.alive:
            return warning("the job has ended" if self.is_job else "the workload is not running — press r to restart")
        try:
            self.source.send(control)
        except Exception as exc:  # noqa: BLE001
            return error(f"could not send the control: {exc}")
        self.sent.append(control)
        if isinstance(control, protocol.SetBatchSize):
            self.pending_batch = control.batch_size
        elif isinstance(control, protocol.SetKnobs):
            self.pending_knobs = parse_knobs(control.knobs)
        elif isinstance(control, protocol.SetKnob):
            self.pending_knobs = self.knobs.base().with_value(control.name, control.value)
        elif isinstance(control, protocol.TraceWindow):
            self.pending_trace = True
        elif isinstance(control, protocol.Diagnose):
            self.pending_diagnosis = True
        return Notice(note)

    def ranks_text(self) -> str | None:
        """A data-parallel run in one line: ranks, the straggler by own work (or the slowest by step time),
        the all-reduce's exposed time from the last profiler window, the last scaling efficiency."""
        return ranks_line(self.state)

    def not_now(self, action: str, what: str) -> Notice:
        """Why a key does nothing now: a replay is read-only, ``r`` waits for a crash, a stop or a
        hang, and space has nothing to pause once the run has ended; a job's refusals; where the
        output of a run that is not a job goes."""
        if action == job_notices.OUTPUT:
            return job_notices.output_elsewhere(self.info, self.replay)
        if not self.applies(action, True):
            return job_notices.refusal(action, what)
        if self.replay:
            return self.read_only(what)
        if action == "restart":
            return warning(f"r restarts the workload after a crash, a stop or a hang; it is {self.state.status} now")
        if action == "pause_resume":
            return warning("nothing to pause: the workload has ended — r restarts it")
        return warning(f"{what} is not available now")

    def read_only(self, what: str) -> Notice:
        """Why ``what`` (a control) does nothing in a replay."""
        return warning(f"replay: read-only — {what} needs a live run")


def _from_workload(msg: Message) -> bool:
    """A message the workload process sent (not NVML's, not the watchdog's)."""
    if isinstance(msg, Sample):
        return True
    return isinstance(msg, Event) and msg.what not in (NOT_RESPONDING, NVML_LOST)
