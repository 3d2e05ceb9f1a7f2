"""Where a stalled job waits (the palette's ``STALL_COMMAND``): its latest stall report, a line per
thread of each of its processes, redrawn while the stall lasts (the job reports again every
minute), and whether steps came again. A recording keeps the report's first line only (the
events' details are not in the CSV).
"""

from __future__ import annotations

from rich.text import Text

from gpudash.core.goodput import stall_of
from gpudash.core.protocol import STALLED_PHASE
from gpudash.tui.phases import PhaseTimeline
from gpudash.tui.screens import LiveReport

NO_STALL = "no stall reported in this run: a job is stalled when no step comes for much longer than its steps take"


def stall_text(timeline: PhaseTimeline, replay: bool) -> Text:
    """The latest stall report: its line, where each thread waits, and whether it is over."""
    e = timeline.stall
    if e is None:
        return Text(NO_STALL, style="dim")
    out = Text()
    out.append(f"at {e.time_s:.0f} s: ", style="bold")
    out.append(f"{e.message}\n\n", style="bold red")
    stall = stall_of(e)
    if stall is not None and stall.where:
        out.append("where each thread waits:\n", style="bold underline")
        for line in stall.where:
            out.append(f"  {line}\n")
    elif replay:
        out.append("a recording keeps the report's first line only\n", style="dim")
    current = timeline.current()
    if timeline.resumed is not None:
        out.append(f"\n{timeline.resumed.message} (at {timeline.resumed.time_s:.0f} s)", style="green")
    elif current is not None and current[0] == STALLED_PHASE:
        out.append("\nstill stalled: the report comes again every minute while it lasts", style="yellow")
    return out


class StallScreen(LiveReport):
    """The stall report over the dashboard; escape closes it."""

    HEADING = "Stalled job: where it waits"
    BODY_ID = "stall-report"
    DEFAULT_CSS = "StallScreen > VerticalScroll { border: thick $error; }"

    def __init__(self, timeline: PhaseTimeline, replay: bool) -> None:
        super().__init__()
        self.timeline, self.replay = timeline, replay

    def report(self) -> Text:
        return stall_text(self.timeline, self.replay)
