"""The dashboard's stats panel: the before/after table of every metric (now, this configuration with
its interval, the previous one, the change and its verdict), the columns that fit the panel's width,
and the same table as plain text for "Copy stats as Markdown / CSV"."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field

from rich import box
from rich.table import Table
from rich.text import Text
from textual.widgets import Static

from gpudash.core.metrics import Averaging, Better
from gpudash.core.textfmt import fmt_duration, fmt_needs, fmt_num, markdown_table
from gpudash.stats.comparison import Estimate, Verdict
from gpudash.stats.fmt import change_parts, fmt_change, fmt_pm
from gpudash.tui.memory_bar import memory_bar, sample_note
from gpudash.tui.state import DashState, StatRow

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
        memory = state.last_memory or sample_note(state.last_sample, state.last_gpu)
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
