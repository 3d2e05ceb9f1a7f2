"""What the dashboard tells the user: a ``Notice`` (one line, maybe a toast), and the one each
event of a run is told as. A diagnosis' is its leading remedy in one line that fits an 80-column
terminal ("→ up to 1.8× (input): more DataLoader workers…; then host/launch-bound"; its verdict
stays in the stats panel's border), and, live, a toast of the verdict with every remedy as
``gpudash diagnose`` prints them, from the event's judgement (``gpudash.diagnosis.judge``), live and
replayed alike. Textual-free, like the controller that returns them."""

from __future__ import annotations

import os
from dataclasses import dataclass
from enum import Enum

from gpudash.core.protocol import DIAGNOSIS, MEMORY_PEAK, NOT_RESPONDING, SAMPLES_DROPPED, Event, EventKind
from gpudash.diagnosis.judge import judgement_of
from gpudash.diagnosis.remedies import LIMIT_WORDS, Remedy
from gpudash.tui.markers import is_trace, trace_line, trace_of
from gpudash.tui.state import DashState

STARTING = "starting workload (importing torch)…"
PERFETTO = "ui.perfetto.dev"
LINE_WIDTH = 78  # the message bar of an 80-column terminal (a cell of padding each side)
MIN_ADVICE = 24  # the advice kept before the next limit's figure is left out


class Severity(str, Enum):
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


@dataclass(frozen=True)
class Notice:
    """One line for the user; ``toast`` also pops it up, with ``detail`` where that says more."""

    text: str
    severity: Severity = Severity.INFO
    toast: bool = False
    detail: str = ""


def error(text: str) -> Notice:
    return Notice(text, Severity.ERROR, toast=True)


def warning(text: str) -> Notice:
    return Notice(text, Severity.WARNING)


def event_notice(e: Event, s: DashState, live: bool, applying: str) -> Notice | None:
    """What event ``e`` of a run (``live``, or a replay's) is told as, after ``s`` took it in;
    ``applying``: the knobs a warm-up applies. None for an event told nothing of."""
    if is_trace(e):
        return trace_notice(e, live)
    if e.kind == EventKind.PROGRESS:
        return Notice(f"{e.message} — applying knobs {applying}; steps resume when done")
    if e.kind == EventKind.STARTING:
        return Notice(f"{STARTING} ({e.message})" if e.message else STARTING)
    if e.kind == EventKind.STARTED:
        return Notice(e.message or f"started {s.run.workload} / {s.run.variant}")
    if e.kind == EventKind.CHANGED:
        return Notice(f"{e.label} at {e.time_s:.1f} s — stats now compare against the previous config")
    if e.kind == EventKind.ERROR and e.what == NOT_RESPONDING:
        return Notice(f"✗ {e.message} — r restarts it, q quits", Severity.ERROR, toast=live)
    if e.kind == EventKind.ERROR and e.what == SAMPLES_DROPPED:
        return warning(e.message)
    if e.kind == EventKind.ERROR:
        still = f"knobs stay {s.run.knobs}" if e.what == "knobs" else f"batch {s.run.batch_size}"
        return Notice(f"✗ {e.message or e.label} — still running {s.run.variant}, {still}", Severity.ERROR, toast=live)
    if e.kind == EventKind.PAUSED:
        return Notice("paused (space resumes)")
    if e.kind == EventKind.RESUMED:
        return Notice("resumed")
    if e.kind == EventKind.CRASHED:
        why = e.message or "the workload process died"
        return Notice(f"✗ workload crashed: {why} — press r to restart", Severity.ERROR, toast=live)
    if e.kind == EventKind.MEASURED and e.what == DIAGNOSIS:
        return diagnosis_notice(e, live)
    if e.kind == EventKind.MEASURED and e.what == MEMORY_PEAK:  # asked for by a key: answered where it is seen
        return Notice(f"memory: {e.message}", toast=live)
    if e.kind == EventKind.MEASURED:
        return Notice(e.message)
    if e.kind == EventKind.STOPPED:
        return Notice((e.message or "the workload stopped") + (" — press r to restart" if live else ""))
    return None


def gpm_notice(why: str) -> Notice:
    """Why GPM's figures (SM, tensor and DRAM activity) stay blank: told once, the rest goes on."""
    return Notice(
        f"GPM unavailable: {why} — SMs busy, tensor and DRAM read –; kernel% says only that a kernel ran",
        Severity.WARNING,
        toast=True,
    )


def trace_notice(e: Event, live: bool) -> Notice:
    """A profiler window's answer: where its trace is (for Perfetto) and its figures."""
    note = trace_of(e)
    path = note.path if note is not None else ""
    summary = (e.message.removesuffix(f" → {path}") if path else "") or trace_line(e)
    text = f"open in {PERFETTO}: {short_path(path)} — {summary}" if path else summary
    return Notice(text, toast=live)


def short_path(path: str) -> str:
    """``path`` relative to the working directory when it is under it (the dashboard's traces are)."""
    try:
        rel = os.path.relpath(path)
    except ValueError:  # another drive (Windows)
        return path
    return path if rel.startswith("..") else rel


def remedy_line(r: Remedy, width: int = LINE_WIDTH) -> str:
    """``r`` in at most ``width`` cells: its worth, its limit, its advice (cut first) and the limit
    that comes next (with its worth where that fits)."""
    head = f"→ up to {r.up_to:.2g}× ({r.limit}): "
    advice = r.advice.split(": ", 1)[-1]  # the steps, without the bound's words before them
    tails = []
    if r.then:
        words = next((w for w in LIMIT_WORDS.values() if r.then.startswith(w)), "…")
        more = r.then.rpartition(", up to ")[2]
        tails = [f"; then {words} (up to {more})"] if more.endswith("× more") else []
        tails.append(f"; then {words}")
    room = width - len(head)
    tail = next((t for t in tails if room - len(t) >= min(len(advice), MIN_ADVICE)), "")
    return _cut(f"{head}{_cut(advice, room - len(tail))}{tail}", width)


def _cut(text: str, room: int) -> str:
    """``text`` in ``room`` cells: whole words, then "…"."""
    if len(text) <= room:
        return text
    kept = text[: max(room - 1, 0)]
    space = kept.rfind(" ")
    if text[len(kept)] not in " ,;" and space >= 2 * len(kept) // 3:  # not inside a word, unless a long one
        kept = kept[:space]
    return kept.rstrip(" ,;(") + "…"


def diagnosis_notice(e: Event, live: bool) -> Notice:
    """A diagnosis' notice: its leading remedy (its verdict where none is worth naming), and, live,
    a toast of the verdict and every remedy."""
    judgement = judgement_of(e)
    found = judgement.remedies if judgement is not None else ()
    if not found:
        return Notice(e.message)
    every = "\n".join([e.message, *(f"  {r.line()}" for r in found)])
    return Notice(remedy_line(found[0]), toast=live, detail=every)
