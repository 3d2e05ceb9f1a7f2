"""What a headless recording says on stderr: its events and progress lines while it runs, and its
last line when it ends (the report: what was recorded, or why nothing was).

Torch- and Textual-free; the recording itself is ``gpudash.recording.headless``'s, which hands
itself here as an ``EndedRecording``.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Protocol

from gpudash.core.compile_note import quiet
from gpudash.core.protocol import REFUSED, TRACEBACK, Event, EventKind, ExitCode, Sample
from gpudash.core.textfmt import fmt_duration, fmt_needs, fmt_num
from gpudash.stats.fmt import fmt_pm

if TYPE_CHECKING:  # pragma: no cover
    from gpudash.recording.record import CsvRecorder
    from gpudash.recording.session_api import RecordedSession
    from gpudash.stats.segments import Segment


class EndedRecording(Protocol):
    """What the report reads of a headless recording that has ended (and, for a run that never
    started, sets: its status and exit code)."""

    status: str
    code: ExitCode

    @property
    def path(self) -> str | os.PathLike[str]: ...

    @property
    def quiet(self) -> bool: ...

    @property
    def session(self) -> RecordedSession: ...

    @property
    def recorder(self) -> CsvRecorder | None: ...

    @property
    def failure(self) -> Event | None: ...  # the "crashed" event, when one came

    @property
    def diagnoses(self) -> list[Event]: ...


def say(text: str) -> None:
    """One ``gpudash:`` line on stderr, from the terminal's left edge (``fresh_line``)."""
    print(f"{fresh_line(sys.stderr)}gpudash: {text}", file=sys.stderr, flush=True)


def fresh_line(stream: object) -> str:
    """What starts a line of gpudash's on ``stream``: on a terminal, a carriage return and an erase
    of the line, so that it is not glued after a job's progress bar (tqdm's ``\r`` line, with no
    newline yet: the bar is drawn again at its next update, on the line below); elsewhere nothing."""
    try:
        terminal = bool(stream.isatty())  # type: ignore[attr-defined]
    except (AttributeError, ValueError, OSError):
        terminal = False
    return "\r\x1b[K" if terminal and os.environ.get("TERM") != "dumb" else ""


def describe_event(e: Event) -> str | None:
    """An event's line on stderr while the recording runs (None: not said)."""
    if e.kind in (EventKind.STARTING,) or quiet(e):
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
    """ "231 steps/s now · encdec/serial bs8 229.1 ± 3.2 steps/s (95% CI, 36 samples) · 00:40 elapsed of 01:00"
    (a job's: "… (95% CI over 380 steps)"; too short for one: how much longer, a job of long steps'
    counted in its steps), then what makes the machine noisy now, when something does (" · ⚠ noisy: host load: …")."""
    now = f"{fmt_num(sample.steps_per_s)} steps/s now" if sample is not None else "no sample yet"
    estimate = segment.estimate("steps_per_s") if segment is not None else None
    if segment is None:
        mean = "warming up"
    elif estimate is None:
        mean = f"{segment.label} warming up"
    elif not estimate.has_interval:
        needs = segment.needs_s("steps_per_s", sample.interval_s if sample is not None else 1.0) or 0.0
        mean = f"{segment.label} {fmt_num(estimate.mean)} steps/s (too short: {fmt_needs(needs)})"
    else:
        over = f" over {segment.counted_steps} steps" if segment.job else f", {estimate.n_samples} samples"
        mean = f"{segment.label} {fmt_pm(estimate)} steps/s (95% CI{over})"
    elapsed = f"{fmt_duration(elapsed_s)} elapsed" + (f" of {fmt_duration(duration_s)}" if duration_s else "")
    noisy = f" · ⚠ noisy: {sample.noise}" if sample is not None and sample.noise else ""
    return f"{now} · {mean} · {elapsed}{noisy}"


def report_end(recording: EndedRecording, ended_by_itself: bool = False) -> None:
    """The last line on stderr: the failure, or (unless quiet) what was recorded.
    ``ended_by_itself``: a user's job that failed on its own after it was recorded (its exit
    code, a signal): its end, as its event says it, with what was kept, even when quiet — its
    own output says why; not gpudash's "workload failed"."""
    recorder, log_path, failure = recording.recorder, recording.session.log_path or "", recording.failure
    failed = recording.code == ExitCode.FAILED and recording.status.startswith("workload failed")
    own_end = ended_by_itself and failed and failure is not None
    if recorder is None:
        _report_not_started(recording)
    elif failed and not own_end:
        named = not log_path or log_path in recording.status
        say(f"error: {recording.status}" + ("" if named else f" (see {log_path})"))
    elif not recording.quiet or own_end:
        if not recording.quiet:
            for event in recording.diagnoses:
                say(f"diagnosis: {event.message}")
            for line in recorder.summaries:  # each configuration's mean ± interval, as in the CSV
                say(line)
        where = f" in {recording.path}" if recorder.path else ""
        end = failure.message if own_end and failure is not None else recording.status
        say(f"{end}: {recorder.rows} rows{where} ({rows_said(recorder.kinds)})")


ROW_NAMES = {  # a CSV row_kind: what its rows are, one and several (never "samples": those are training's)
    "sample": ("throughput window", "throughput windows"),
    "rank": ("rank's window", "ranks' windows"),
    "gpu": ("GPU reading", "GPU readings"),
    "event": ("event", "events"),
    "summary": ("summary", "summaries"),
}


def rows_said(kinds: dict[str, int]) -> str:
    """What a recording's rows hold: "113 throughput windows, 14 events, 1 summary"."""
    said = []
    for kind, (one, several) in ROW_NAMES.items():
        n = kinds.get(kind, 0)
        if n:
            said.append(f"{n} {one if n == 1 else several}")
    return ", ".join(said) or "no data row"


def _report_not_started(recording: EndedRecording) -> None:
    """The one line of a run that ended before its workload started (nothing was recorded);
    the log is removed unless it holds a crash's traceback."""
    failure, log_path = recording.failure, recording.session.log_path or ""
    if failure is not None and failure.details.get(REFUSED):
        recording.status, recording.code = f"refused: {failure.message}", ExitCode.USAGE
        if failure.details.get(TRACEBACK) and not _empty(log_path):  # the user's code: its traceback stays
            say(f"error: {failure.message} (traceback: {log_path})")
            return
        say(f"error: {failure.message}")
        _remove(log_path)
        return
    if failure is not None or recording.code == ExitCode.FAILED:
        why = failure.message if failure is not None else recording.status.removeprefix("workload failed: ")
        recording.code = ExitCode.FAILED
        say(
            f"error: the workload failed before it started, nothing recorded: {why}"
            + ("" if log_path in why or _empty(log_path) else f" (see {log_path})")
        )
        if _empty(log_path):
            _remove(log_path)
        return
    if _empty(log_path):
        _remove(log_path)
    if recording.code == ExitCode.INTERRUPTED or not recording.quiet:
        say(f"{recording.status} before the workload started: nothing recorded")


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
