"""The dashboard's non-chart widgets: header, message bar (the stats panel: ``stats_panel``; the modal
screens: ``screens``)."""

from __future__ import annotations

import os
from dataclasses import dataclass

from rich.text import Text
from textual.widgets import Static

from gpudash.core.protocol import GpuInfo
from gpudash.core.textfmt import fmt_duration
from gpudash.tui.mfu import mfu_figure
from gpudash.tui.phase_strip import phase_text
from gpudash.tui.state import DashState, Status

STATUS_STYLE = {
    Status.STARTING: "bold yellow",
    Status.RUNNING: "bold green",
    Status.PAUSED: "bold cyan",
    Status.CRASHED: "bold white on red",
    Status.STOPPED: "bold",
    "replay": "bold magenta",
    "following": "bold magenta",
}


def gpu_line(info: GpuInfo | None, state: DashState) -> Text:
    t = Text()
    if info is None:
        t.append("GPU: ", style="bold")
        t.append("asking NVML…", style="dim")
        return t
    if not info.available:
        t.append("GPU: ", style="bold")
        t.append("no telemetry — ", style="yellow")
        t.append(f"NVML unavailable: {info.unavailable or 'unknown reason'}", style="yellow")
        return t
    t.append("GPU", style="bold")
    if info.index is not None:
        t.append(f" {info.index}", style="bold")
    t.append(f": {info.name or 'unknown'}", style="bold")
    if info.driver:
        t.append(f" · driver {info.driver}")
    g = state.last_gpu
    if g is not None:
        if g.temp_c is not None:
            t.append(f" · {g.temp_c:.0f}°C")
        if g.mem_used_mib is not None and g.mem_total_mib:
            t.append(f" · mem {g.mem_used_mib / 1024:.1f}/{g.mem_total_mib / 1024:.0f} GiB")
        if g.throttle:
            t.append(f" · throttle: {g.throttle}", style="bold red")
    return t


NARROW = 60  # columns under which the header leads with the run's status


def batch_text(batch_size: int) -> str:
    """A batch size as the dashboard shows it: "–" where it is not known (0: a job without a DataLoader)."""
    return str(batch_size) if batch_size else "–"


def mfu_text(state: DashState) -> Text:
    """The header's model FLOPs utilisation: "  MFU 41.2% · 402 TFLOP/s", or "MFU blank" (never a 0
    for what is not known; why it is blank is the "flops" event's line, said once as the run's
    message, not again here); nothing before a count says anything."""
    figure = mfu_figure(state.last_sample, state.flops_event())
    if figure is None:
        return Text()
    text, why = figure
    return Text.assemble("  ", (text, "bold cyan" if why is None else "yellow"))


@dataclass(frozen=True)
class HeaderFacts:
    """What a header says beyond the dashboard's state: where and how long it runs, its status,
    the recording's path (None: not recording), a replay's file name and the knobs on."""

    device: str
    run_time_s: float
    status: str
    recording: str | None = None
    source_label: str | None = None
    knobs: str = "none"


def status_pill(status: str) -> Text:
    """The run's status, reversed out in its colour: " running "."""
    return Text(f" {status} ", style=STATUS_STYLE.get(status.split(" ")[0], "bold"))


def recording_text(recording: str | None) -> Text:
    """The REC mark while recording ("  ● REC run.csv", the file's name); nothing while not."""
    if not recording:
        return Text()
    return Text.assemble(("  ● REC ", "bold red"), (os.path.basename(recording), "red"))


class RunHeader(Static):
    """Two lines: what runs (workload, variant, batch, device, time, status, REC); the knobs (a
    replayed job's phase now and goodput) and the GPU."""

    DEFAULT_CSS = """
    RunHeader { height: 2; background: $panel; padding: 0 1; text-wrap: nowrap; text-overflow: ellipsis; }
    """

    def show(self, state: DashState, facts: HeaderFacts) -> None:
        """Draw the header's two lines (``lines``), each cut with an ellipsis where it is too long."""
        both = Text("\n", no_wrap=True, overflow="ellipsis").join(self.lines(state, facts))
        both.no_wrap, both.overflow = True, "ellipsis"
        self.update(both)

    def lines(self, state: DashState, facts: HeaderFacts) -> tuple[Text, Text]:
        """A family's run: what runs, its status and figures; the knobs, the phase and the GPU."""
        t = Text(no_wrap=True, overflow="ellipsis")
        pill = status_pill(facts.status)
        narrow = 0 < self.size.width < NARROW
        if narrow:  # the status first, where it is not cut off ("crashed", "reading 37%")
            t.append_text(pill)
        else:
            t.append(" gpudash ", style="bold reverse")
        t.append(" ")
        t.append(state.run.workload or "?", style="bold")
        t.append(" / ")
        t.append(state.run.variant or "?", style="bold")
        t.append(" · batch ")
        t.append(batch_text(state.run.batch_size), style="bold")
        t.append(f" · {facts.device} · {fmt_duration(facts.run_time_s)}")
        if not narrow:
            t.append("  ")
            t.append_text(pill)
        t.append_text(recording_text(facts.recording))
        mfu = mfu_text(state)  # before a replay's file name, which the message bar said
        t.append_text(mfu)
        if facts.source_label:
            t.append(f"{'  ' if mfu else ' '}{facts.source_label}", style="magenta")
        noise = state.last_sample.noise if state.last_sample is not None else ""
        if noise:  # last: the ellipsis cuts the detail, never what runs
            t.append("  ⚠ noisy ", style="bold black on yellow")
            t.append(f" {noise}", style="yellow")
        line2 = Text.assemble(
            ("knobs: ", "bold"),
            (facts.knobs, "dim" if facts.knobs == "none" else "bold cyan"),
            phase_text(state.phases, facts.run_time_s),  # a job's phase now and goodput
            " · ",
            gpu_line(state.gpu_info, state),
        )
        return t, line2


class MessageBar(Static):
    """One line: the latest message for the user (errors stay until the next message)."""

    DEFAULT_CSS = """
    MessageBar { height: 1; padding: 0 1; color: $text-muted; text-wrap: nowrap; text-overflow: ellipsis; }
    MessageBar.-error { color: $text-error; background: $error-muted; text-style: bold; }
    MessageBar.-warning { color: $text-warning; background: $warning-muted; }
    MessageBar.-info { color: $text; }
    """

    def say(self, text: str, severity: str = "info") -> None:
        self.set_class(severity == "error", "-error")
        self.set_class(severity == "warning", "-warning")
        self.set_class(severity == "info", "-info")
        self.update(Text(text, no_wrap=True, overflow="ellipsis"))
        self.text = text

    text: str = ""


def plain_text(widget: Static, width: int | None = None) -> str:
    """What a Static shows, as plain text (for tests and debugging)."""
    from io import StringIO

    from rich.console import Console

    out = StringIO()
    console = Console(
        file=out, width=width or max(20, widget.size.width or 120), color_system=None, legacy_windows=False
    )
    content = widget.content
    console.print(content if not isinstance(content, str) else Text(content))
    return out.getvalue()
