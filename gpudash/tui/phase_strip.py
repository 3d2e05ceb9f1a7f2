"""A job's phases on screen (``gpudash.tui.phases``): the header's phase now and goodput, and the
strip under the throughput chart — one row of the chart's own columns, each the phase that took
most of its time — with its legend in the chart's title.

Each phase has its colour (the header's and the strip's) and its glyph, so the strip reads
without colour too (``NO_COLOR``): training █ green, evaluation ▓ yellow, checkpoint ▒ cyan,
compile ▞ magenta, stalled ! red, suspended ‖ blue, other (what the job did between steps that was
not training: an upload, a barrier) ▚ white, startup, teardown, profiling (gpudash's own profiler
windows between steps) and the rest ░ grey.
"""

from __future__ import annotations

from rich.text import Text

from gpudash.core.protocol import (
    CHECKPOINT,
    COMPILE,
    EVALUATION,
    OTHER,
    PHASES,
    PROFILING,
    STALLED_PHASE,
    SUSPENDED,
    TEARDOWN,
    TRAINING,
)
from gpudash.core.textfmt import fmt_duration
from gpudash.tui.phases import PhaseTimeline

COLOURS = {
    TRAINING: "green",
    EVALUATION: "yellow",
    CHECKPOINT: "cyan",
    COMPILE: "magenta",
    STALLED_PHASE: "red",
    SUSPENDED: "blue",
    OTHER: "white",
}
QUIET = "grey50"  # startup, teardown: not the job's own work
GLYPHS = {TRAINING: "█", EVALUATION: "▓", CHECKPOINT: "▒", COMPILE: "▞", STALLED_PHASE: "!", SUSPENDED: "‖", OTHER: "▚"}
QUIET_GLYPH = "░"
# the legend's names (the others': their own)
SHORT = {
    TRAINING: "train",
    EVALUATION: "eval",
    CHECKPOINT: "ckpt",
    STALLED_PHASE: "stall",
    SUSPENDED: "stopped",
    TEARDOWN: "exit",
    PROFILING: "prof",
}


def phase_style(phase: str) -> str:
    """The header's style of a phase: bold in its colour (a stall bold red), the quiet ones dim."""
    colour = COLOURS.get(phase)
    return f"bold {colour}" if colour else "dim"


def phase_text(timeline: PhaseTimeline, now_s: float) -> Text:
    """ " · evaluation 3 s · goodput 82%": the phase now, coloured, and for how long, then goodput;
    nothing for a run without phases (a family's)."""
    out = Text()
    if not timeline.active:
        return out
    current = timeline.current()
    if current is not None:
        phase, since = current
        out.append(" · ")
        out.append(f"{phase} {_seconds(now_s - since)}", style=phase_style(phase))
    pct = timeline.goodput_pct(now_s)
    if pct is not None:
        out.append(f" · goodput {pct:.0f}%")
    return out


def _seconds(s: float) -> str:
    return f"{max(0.0, s):.0f} s" if s < 60 else fmt_duration(s)


def legend(timeline: PhaseTimeline, t0: float, t1: float, now_s: float, columns: int) -> Text | None:
    """ "█ train ▓ eval ▒ ckpt": the phases the strip of ``columns`` cells over ``[t0, t1]`` shows,
    in their order; None when it shows none (a run without phases, or none in that window)."""
    shown = set(timeline.buckets(t0, t1, columns, now_s)) if timeline.active else set()
    out = Text()
    for phase in (p for p in PHASES if p in shown):
        if out:
            out.append(" ")
        out.append(_glyph(phase), style=_colour(phase))
        out.append(f" {SHORT.get(phase, phase)}")
    return out or None


def strip_row(timeline: PhaseTimeline, t0: float, t1: float, columns: range, width: int, now_s: float) -> Text:
    """The strip: blank up to the chart's first data column, then a cell per column."""
    row = Text(" " * columns.start, no_wrap=True, overflow="crop", end="")
    cells = timeline.buckets(t0, t1, len(columns), now_s)
    i = 0
    while i < len(cells):  # runs of one phase: a span each
        j = i
        while j < len(cells) and cells[j] == cells[i]:
            j += 1
        phase = cells[i]
        row.append(" " * (j - i) if phase is None else _glyph(phase) * (j - i), style=_colour(phase) if phase else "")
        i = j
    row.pad_right(max(0, width - row.cell_len))
    return row


def with_strip(chart: Text, key: Text | None, strip: Text) -> Text:
    """The chart with the strip as its last row and the legend ``key``, where its title shows it,
    coloured."""
    title = chart.plain.split("\n", 1)[0]
    at = title.find(key.plain) if key is not None else -1
    if key is not None and at >= 0:
        for span in key.spans:
            chart.stylize(span.style, at + span.start, at + span.end)
    chart.append("\n")
    chart.append_text(strip)
    return chart


def _glyph(phase: str) -> str:
    return GLYPHS.get(phase, QUIET_GLYPH)


def _colour(phase: str) -> str:
    return COLOURS.get(phase, QUIET)
