"""What the dashboard tells the user of a job (``gpudash -- CMD``): the keys that do not apply to
one, the notices of its events, and where a run's output is when it is not a job's. Textual-free,
like the controller that returns them.

A job's settings are its own arguments: of the keys that steer a run, only the profiler window,
the diagnosis and the recording apply to one (``JOB_STEERS``); the others say why not. A stall is
told, an error, with where the job waits (every thread: the palette's ``STALL_COMMAND``), and so
is its end; the job's other phases are not (they come often: the header and the strip show them).
"""

from __future__ import annotations

from gpudash.core.protocol import (
    NOT_RESPONDING,
    SAMPLES_DROPPED,
    STALLED_PHASE,
    Diagnose,
    Event,
    EventKind,
    MemoryPeak,
    SourceInfo,
    Stop,
    TraceWindow,
)
from gpudash.tui.notices import Notice, Severity, warning

JOB_STEERS = frozenset({"trace_window", "diagnose", "memory_peak", "record"})  # the steering actions a job takes
JOB_CONTROLS = (TraceWindow, Diagnose, MemoryPeak, Stop)  # the controls a job answers
NOT_FOR_A_JOB = "not for a job: its settings are its own arguments"
OUTPUT = "output"  # the action of the job's output pane
STALL_COMMAND = "Stalled job: where each thread waits"  # the palette's command for the stall screen


def refusal(action: str, what: str) -> Notice:
    """Why ``action`` (a steering key, titled ``what``) does nothing for a job."""
    if action == "pause_resume":
        return warning("not for a job: gpudash cannot pause its loop (space)")
    if action == "restart":
        return warning("not for a job: gpudash does not restart it; run its command again (r)")
    return warning(f"{NOT_FOR_A_JOB} ({what})")


def job_notice(e: Event, live: bool) -> Notice | None:
    """What a job's event says where it differs from a family's (no restart, no variant to stay
    on); None: as a family's (``notices.event_notice``)."""
    if e.kind == EventKind.STOPPED:
        return Notice((e.message or "the job stopped") + (" — o shows its output, q quits" if live else ""))
    if e.kind == EventKind.CRASHED:
        why = e.message or "the job ended"
        return Notice(f"✗ {why} — o shows its output, q quits", Severity.ERROR, toast=live)
    if e.kind == EventKind.ERROR and e.what not in (NOT_RESPONDING, SAMPLES_DROPPED):
        return Notice(f"✗ {e.message or e.label}", Severity.ERROR, toast=live)
    return None


def phase_notice(e: Event, live: bool) -> Notice | None:
    """A job's stall (live or replayed): where it waits, an error; steps again after it (or its end);
    None for any other event (its other phases say nothing)."""
    if e.kind == EventKind.STALLED:
        return Notice(f'✗ stalled: {e.message} — ctrl+p "stalled" shows every thread', Severity.ERROR, toast=live)
    if e.kind == EventKind.PHASE and e.what == STALLED_PHASE and e.after:
        return Notice(e.message or f"steps resumed after {e.after} s", toast=live)
    return None


def output_elsewhere(info: SourceInfo, replay: bool) -> Notice:
    """Where the output of a run that is not a job goes (the key ``o`` of a family's run)."""
    if replay:
        return warning("a replay has no output to show: the recorded run's went to that run's log file")
    if info.log_path:
        return Notice(f"the workload's output goes to its log file: {info.log_path}", toast=True)
    return warning("no output to show: this run names no log file of its workload")
