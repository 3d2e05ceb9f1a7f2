"""The dashboard's non-chart widgets: header, message bar, stats table (the modal screens: ``screens``)."""

from __future__ import annotations

import csv
import io
import os
from dataclasses import dataclass, field

from rich import box
from rich.table import Table
from rich.text import Text
from textual.widgets import Static

from gpudash.core.metrics import Averaging, Better
from gpudash.core.protocol import GpuInfo
from gpudash.core.textfmt import fmt_duration, fmt_needs, fmt_num, markdown_table
from gpudash.stats.comparison import Estimate, Verdict
from gpudash.stats.fmt import change_parts, fmt_change, fmt_pm
from gpudash.tui.memory_bar import memory_bar, sample_details
from gpudash.tui.mfu import mfu_figure
from gpudash.tui.phase_strip import phase_text
from gpudash.tui.state import DashState, StatRow, Status

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


HEADLINE = ("steps_per_s", "samples_per_s")  # the title's change with its interval: the first compared


def _pct_style(row: StatRow) -> str:
    """Green or red only for a real difference measured on a quiet machine."""
    return "bold" if row.noisy else {1: "bold green", -1: "bold red"}.get(row.verdict, "bold")


def mean_cell(mean: float | None, estimate: Estimate | None, averaged: bool) -> Text:
    """A configuration's mean ± its interval; says so when it has none yet."""
    if not averaged or mean is None:
        return Text(fmt_num(mean))
    if estimate is None:
        return Text("warm-up", style="dim")
    if not estimate.has_interval:
        return Text("too short", style="dim")
    hw = estimate.half_width or 0.0
    if hw < 1e-3 * abs(estimate.mean):  # below the mean's printed precision
        return Text(f"{fmt_num(estimate.mean)}±0")
    return Text(fmt_pm(estimate).replace(" ± ", "±"))  # the mean to the half-width's 2 digits


def change_cell(row: StatRow) -> Text:
    """The change alone ("+8%"; its interval is in the panel's title and the copies), coloured only
    for a real difference; else what it is, or what is missing and for how long ("needs ≈ 12 s
    more"); "–" for unlike runs."""
    if row.incomparable is not None:  # the title line says why ("new workload", "batch 8→16")
        return Text("–", style="dim")
    c = row.comparison
    if c is None or c.verdict == Verdict.TOO_SHORT:
        return Text(_missing(row), style="dim")
    if c.verdict == Verdict.NO_CHANGE or (c.verdict == Verdict.WITHIN_NOISE and row.metric.better != Better.NEITHER):
        return Text("no change" if c.verdict == Verdict.NO_CHANGE else str(c.verdict), style="dim")
    if not c.finite:  # from or to zero (syncs per step): say it as it is
        return Text(f"{fmt_num(row.prev)}→{fmt_num(row.mean)}", style=_pct_style(row))
    change, _ = change_parts(c)  # the interval: in the title (the headline figure) and the copies
    return Text(change, style=_pct_style(row))


def change_text(row: StatRow, cell: Text) -> str:
    """``row``'s change ``cell`` as every other output writes it: "+8% (−2 … +19%)"."""
    c = row.comparison
    return fmt_change(c) if c is not None and cell.plain == change_parts(c)[0] else cell.plain


def _missing(row: StatRow) -> str:
    """What a change without a verdict lacks: the previous configuration, this one's warm-up or
    length, or the previous one's length (which will not grow)."""
    if row.prev_estimate is None and row.prev is None:
        return "–"
    if row.estimate is None:
        return f"warm-up, {fmt_needs(row.needs_s)}" if row.needs_s else "warm-up"
    if not row.estimate.has_interval:
        return fmt_needs(row.needs_s) if row.needs_s is not None else "too short"
    return "prev too short"


@dataclass(frozen=True)
class StatsTable:
    """The stats panel's content: a title line, a header of metrics, and labelled rows of cells.

    One source for the panel and for "Copy stats as Markdown / CSV" (the cells' plain text)."""

    title: Text
    headers: list[str]
    rows: list[tuple[str, list[Text]]]
    plain: dict[str, list[str]] = field(default_factory=dict)  # a row's cells as text, where not as shown
    keys: list[str] = field(default_factory=list)  # the metric of each column

    def plain_rows(self) -> list[list[str]]:
        """The cells' text, each on one line (the change as "+8% (−2 … +19%)")."""
        return [[label, *self.plain.get(label, [c.plain for c in cells])] for label, cells in self.rows]

    def markdown(self) -> str:
        """The title as a line of text, then the table as GitHub Markdown."""
        return f"{self.title.plain}\n\n" + markdown_table(["", *self.headers], self.plain_rows())

    def csv(self) -> str:
        """The table as CSV (the first column names the row: now, this cfg, prev cfg, change)."""
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(["row", *self.headers])
        writer.writerows(self.plain_rows())
        return out.getvalue()


def stats_table(state: DashState) -> StatsTable:
    """What the stats panel shows for ``state``: now, this config ± interval, the previous, the change."""
    rows = state.stat_rows()
    if state.gpu_info is not None and not state.gpu_info.available:
        rows = [r for r in rows if not r.metric.needs_gpu]
    cur, prev = state.current, state.previous
    title = Text(no_wrap=True, overflow="ellipsis")
    title.append("this config: ", style="dim")
    title.append(f"{cur.label} ({fmt_duration(cur.duration_s)})" if cur else "–", style="bold")
    title.append("   previous: ", style="dim")
    title.append(f"{prev.label} ({fmt_duration(prev.duration_s)})" if prev else "–")
    if cur is not None and prev is not None and cur.key[0] != prev.key[0]:
        title.append("  · new workload: nothing to compare", style="dim")
    elif cur is not None and prev is not None and cur.key[2] != prev.key[2]:
        title.append(f"  · batch {prev.key[2]}→{cur.key[2]}: compared by samples/s", style="dim")
    headline = next((r for r in rows if r.comparison is not None and r.metric.key in HEADLINE), None)
    if headline is not None and headline.comparison is not None and headline.comparison.finite:
        title.append(f"   {headline.metric.label} ", style="dim")
        title.append(fmt_change(headline.comparison), style=_pct_style(headline))
        noisy = [seg.noise.note() for seg in (prev, cur) if seg is not None and seg.noise.is_noisy]
        if noisy:  # a verdict measured while the machine was noisy says so
            title.append(f"  · measured while {noisy[-1]}", style="yellow")
    changes = [change_cell(r) for r in rows]  # built once: shown, and copied as text
    this = [mean_cell(r.mean, r.estimate, r.metric.mean != Averaging.ENDS) for r in rows]
    for cell in this:
        cell.stylize("bold")
    return StatsTable(
        title,
        [r.metric.label for r in rows],
        [
            ("now", [Text(fmt_num(r.now)) for r in rows]),
            ("this cfg", this),
            ("prev cfg", [mean_cell(r.prev, r.prev_estimate, r.metric.mean != Averaging.ENDS) for r in rows]),
            ("change", changes),
        ],
        {"change": [change_text(r, cell) for r, cell in zip(rows, changes, strict=True)]},
        [r.metric.key for r in rows],
    )


# The stats panel's columns by how much they are wanted, where not all fit: those not named go
# first, and before any of them the ones with nothing to show (no GPM before Hopper, no MFU uncounted)
STATS_KEPT_FIRST = (
    "steps_per_s",
    "samples_per_s",
    "step_ms_p50",
    "mfu_pct",
    "sm_active_pct",
    "gpu_util_pct",
    "syncs_per_step",
    "tensor_active_pct",
    "step_ms_p95",
    "dram_active_pct",
    "joules_per_step",
    "power_w",
    "mem_bw_util_pct",
)
LABEL_WIDTH = 9  # the row names' column ("this cfg")
COLUMN_GAP = 2  # between two columns of the panel's table


def fitted_columns(content: StatsTable, width: int) -> list[int]:
    """The columns the panel shows in ``width`` cells (indexes, in order): all where all fit; else the
    empty ones go first, then the least wanted (``STATS_KEPT_FIRST``) until the rest fit. "Copy stats"
    keeps every column."""
    n = len(content.headers)
    cells = [[row[i] for _, row in content.rows] for i in range(n)]
    widths = [max([len(content.headers[i]), *(c.cell_len for c in cells[i])]) for i in range(n)]
    empty = {i for i in range(n) if all(c.plain.strip() in ("", "–") for c in cells[i])}
    keys = content.keys or content.headers

    def wanted(i: int) -> tuple[bool, int]:  # the largest goes first
        rank = STATS_KEPT_FIRST.index(keys[i]) if keys[i] in STATS_KEPT_FIRST else len(STATS_KEPT_FIRST)
        return (i in empty, rank)

    kept = set(range(n))
    for i in sorted(range(n), key=wanted, reverse=True):
        if len(kept) <= 1 or LABEL_WIDTH + sum(widths[k] + COLUMN_GAP for k in kept) <= width:
            break
        kept.discard(i)
    return sorted(kept)


class StatsPanel(Static):
    """The before/after table: metrics across, now / this config / previous config / change down."""

    DEFAULT_CSS = """
    StatsPanel { height: auto; padding: 0 1; border-top: solid $primary; }
    """

    def show(
        self, state: DashState, last_trace: str | None = None, ranks: str | None = None, diagnosis: str | None = None
    ) -> None:
        """``last_trace``: the latest profiler window's figures, shown in the top border when there is one;
        ``ranks``: a data-parallel run's ranks line, first in the same border; ``diagnosis``: the
        running configuration's diagnosis, before the trace's figures."""
        content = stats_table(state)
        table = Table(
            box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False, expand=True, show_edge=False, collapse_padding=True
        )
        table.add_column("", style="dim", no_wrap=True, min_width=LABEL_WIDTH)
        shown = fitted_columns(content, self.size.width or max(0, self.app.size.width - 2))
        for i in shown:
            table.add_column(content.headers[i], justify="right", no_wrap=True, min_width=len(content.headers[i]))
        for label, cells in content.rows:
            table.add_row(label, *(cells[i] for i in shown))
        from rich.console import Group

        self.update(Group(content.title, table))
        # in the panel's top border: a persistent line that costs no row (80x24 has none to spare)
        parts = [Text(f" {ranks} ", style="bold")] if ranks else []
        memory = state.last_memory or sample_details(state.last_sample, state.last_gpu)
        if (bar := memory_bar(memory)) is not None:
            parts.append(Text(" ").append_text(bar).append(" "))
        if diagnosis:
            parts.append(Text(f" {diagnosis} ", style="bold yellow"))
        if last_trace:
            parts.append(Text(f" {last_trace} ", style="bold magenta"))
        flops = state.flops_event()
        if flops is not None and flops.message:  # what MFU is made of, or why it is blank: the last, cut first
            parts.append(Text(f" {flops.message} ", style="cyan"))
        self.border_title = Text("│").join(parts) if parts else None


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
