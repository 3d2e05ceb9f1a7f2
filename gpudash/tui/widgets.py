"""The dashboard's non-chart widgets: header, message bar, stats table, GPU notice, modals."""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rich import box
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Checkbox, Input, Label, OptionList, Select, Static
from textual.widgets.option_list import Option

from gpudash.core.metrics import Averaging, Better
from gpudash.core.protocol import GpuInfo
from gpudash.core.textfmt import fmt_duration, fmt_num, fmt_pct, markdown_table
from gpudash.stats.comparison import Estimate, Verdict
from gpudash.tui.state import DashState, StatRow, Status
from workloads.knobs import KNOBS, OFF, ON, KnobInfo, Knobs

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


class RunHeader(Static):
    """Two lines: what runs (workload, variant, batch, device, time, status, REC); the knobs and the GPU."""

    DEFAULT_CSS = """
    RunHeader { height: 2; background: $panel; padding: 0 1; text-wrap: nowrap; text-overflow: ellipsis; }
    """

    def show(
        self,
        state: DashState,
        *,
        device: str,
        run_time_s: float,
        status: str,
        recording: str | None,
        source_label: str | None = None,
        knobs: str = "none",
    ) -> None:
        t = Text(no_wrap=True, overflow="ellipsis")
        pill = Text(f" {status} ", style=STATUS_STYLE.get(status.split(" ")[0], "bold"))
        narrow = 0 < self.size.width < NARROW
        if narrow:  # the status first, where it is not cut off ("crashed", "reading 37%")
            t.append_text(pill)
        else:
            t.append(" gpudash ", style="bold reverse")
        t.append(" ")
        t.append(state.workload or "?", style="bold")
        t.append(" / ")
        t.append(state.variant or "?", style="bold")
        t.append(" · batch ")
        t.append(str(state.batch_size or "?"), style="bold")
        t.append(f" · {device}")
        t.append(f" · {fmt_duration(run_time_s)}")
        if not narrow:
            t.append("  ")
            t.append_text(pill)
        if source_label:
            t.append(f" {source_label}", style="magenta")
        if recording:
            t.append("  ● REC ", style="bold red")
            t.append(os.path.basename(recording), style="red")
        line2 = Text.assemble(
            ("knobs: ", "bold"),
            (knobs, "dim" if knobs == "none" else "bold cyan"),
            " · ",
            gpu_line(state.gpu_info, state),
        )
        both = Text("\n", no_wrap=True, overflow="ellipsis").join([t, line2])
        both.no_wrap, both.overflow = True, "ellipsis"
        self.update(both)


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


def _pct_style(row: StatRow) -> str:
    return {1: "bold green", -1: "bold red"}.get(row.verdict, "bold")


def mean_cell(mean: float | None, estimate: Estimate | None, averaged: bool) -> Text:
    """A configuration's mean ± its interval; says so when it has none yet."""
    if not averaged or mean is None:
        return Text(fmt_num(mean))
    if estimate is None:
        return Text("warm-up", style="dim")
    if not estimate.has_interval:
        return Text("too short", style="dim")
    hw = estimate.half_width or 0.0
    tiny = hw < 1e-3 * abs(estimate.mean)  # below the mean's printed precision
    return Text(f"{fmt_num(estimate.mean)}±{'0' if tiny else fmt_num(hw)}")


def change_cell(row: StatRow) -> Text:
    """The change as "+5.0±1.2%", coloured only for a real difference; else what it is."""
    c = row.comparison
    if c is None:
        return Text(fmt_pct(row.change_pct), style="dim" if row.change_pct is not None else "")
    if c.verdict in (Verdict.NO_CHANGE, Verdict.TOO_SHORT) or (
        c.verdict == Verdict.WITHIN_NOISE and row.metric.better != Better.NEITHER
    ):
        return Text("no change" if c.verdict == Verdict.NO_CHANGE else str(c.verdict), style="dim")
    if not c.finite:  # from or to zero (syncs per step): say it as it is
        return Text(f"{fmt_num(row.prev)}→{fmt_num(row.mean)}", style=_pct_style(row))
    half = (c.high - c.low) / 2 * 100 if c.low is not None and c.high is not None else None
    text = f"{c.change_pct:+.1f}" + (f"±{half:.1f}" if half is not None else "") + "%"
    return Text(text, style=_pct_style(row))


@dataclass(frozen=True)
class StatsTable:
    """The stats panel's content: a title line, a header of metrics, and labelled rows of cells.

    One source for the panel and for "Copy stats as Markdown / CSV" (the cells' plain text)."""

    title: Text
    headers: list[str]
    rows: list[tuple[str, list[Text]]]

    def plain_rows(self) -> list[list[str]]:
        return [[label, *(c.plain for c in cells)] for label, cells in self.rows]

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
    this = [mean_cell(r.mean, r.estimate, r.metric.mean != Averaging.ENDS) for r in rows]
    for cell in this:
        cell.stylize("bold")
    return StatsTable(
        title,
        [r.label for r in rows],
        [
            ("now", [Text(fmt_num(r.now)) for r in rows]),
            ("this cfg", this),
            ("prev cfg", [mean_cell(r.prev, r.prev_estimate, r.metric.mean != Averaging.ENDS) for r in rows]),
            ("change", [change_cell(r) for r in rows]),
        ],
    )


class StatsPanel(Static):
    """The before/after table: metrics across, now / this config / previous config / change down."""

    DEFAULT_CSS = """
    StatsPanel { height: auto; padding: 0 1; border-top: solid $primary; }
    """

    def show(self, state: DashState, last_trace: str | None = None, ranks: str | None = None) -> None:
        """``last_trace``: the latest profiler window's figures, shown in the top border when there is one;
        ``ranks``: a data-parallel run's ranks line, first in the same border."""
        content = stats_table(state)
        table = Table(
            box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False, expand=True, show_edge=False, collapse_padding=True
        )
        table.add_column("", style="dim", no_wrap=True, min_width=9)
        for label in content.headers:
            table.add_column(label, justify="right", no_wrap=True, min_width=len(label))
        for label, cells in content.rows:
            table.add_row(label, *cells)
        from rich.console import Group

        self.update(Group(content.title, table))
        # in the panel's top border: a persistent line that costs no row (80x24 has none to spare)
        parts = [Text(f" {ranks} ", style="bold")] if ranks else []
        if last_trace:
            parts.append(Text(f" {last_trace} ", style="bold magenta"))
        self.border_title = Text("│").join(parts) if parts else None


class HelpScreen(ModalScreen[None]):
    """Every key and what each chart means."""

    BINDINGS = [Binding("escape,q,question_mark,f1", "dismiss", "Close")]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 90%; max-width: 100; height: 90%; border: thick $primary;
                                  background: $surface; padding: 0 1; }
    """

    def __init__(
        self,
        keys: Sequence[tuple[str, str]],
        charts: Sequence[tuple[str, str]],
        replay: bool,
        log_path: str | None = None,
    ) -> None:
        super().__init__()
        self._log_path = log_path
        self._keys = keys
        self._charts = charts
        self._replay = replay

    def compose(self) -> ComposeResult:
        t = Text()
        t.append("gpudash — what pipelining, GPU augmentation and host-device syncs do to throughput\n\n", style="bold")
        if self._replay:
            t.append("Replay of a recorded run: read-only, controls are off.\n\n", style="magenta")
        t.append("Keys (also in the command palette, ctrl+p)\n", style="bold underline")
        for k, d in self._keys:
            t.append(f"  {k:<14}", style="bold cyan")
            t.append(f"{d}\n")
        t.append("\nCharts (one shared time axis; a red line marks every change)\n", style="bold underline")
        for title, helptext in self._charts:
            t.append(f"  {title}\n", style="bold")
            t.append(f"    {helptext}\n")
        t.append("\nStats panel\n", style="bold underline")
        t.append(
            "  now: the latest sample. this cfg: the mean since the last change ± its 95% interval\n"
            "  (batch means; the first second is warm-up and left out; 'too short' until there are\n"
            "  enough samples). prev cfg: the same for the configuration before.\n"
            "  change: this vs prev in percent ± its interval, green/red only when the difference is\n"
            "  real (significant and over 2%); otherwise 'no change' or 'within noise'.\n"
            "  J/step: NVML energy over the steps done.\n"
            "  last trace (in the panel's top line): the latest profiler window's figures (T): GPU busy\n"
            "  and idle share of the window, multi-stream overlap, kernels per step; a magenta 'trace'\n"
            "  line on the charts marks where it began. Its .json.gz file opens in ui.perfetto.dev.\n"
        )
        if self._log_path:
            t.append("\nThe workload's own output (warnings, tracebacks) goes to\n", style="bold underline")
            t.append(f"  {self._log_path}\n")
        t.append("\nPress escape to close.", style="dim")
        with VerticalScroll():
            yield Static(t)


class _Dialog(ModalScreen[Any]):
    """A small modal with a title; escape cancels (dismissed with None)."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, title: str) -> None:
        super().__init__()
        self._title = title

    def action_cancel(self) -> None:
        self.dismiss(None)


class PromptScreen(_Dialog):
    """One line of input (batch size, recording path), parsed here; escape cancels.

    ``parse`` turns the text into the value the screen is dismissed with; one of ``errors``
    raised by it is shown under the input (the one message of that check) and the prompt stays.
    """

    DEFAULT_CSS = """
    PromptScreen { align: center middle; }
    PromptScreen > Vertical { width: 64; height: auto; border: thick $primary; background: $surface;
                              padding: 1 2; }
    PromptScreen Label { width: 100%; }
    PromptScreen #prompt-error { color: $text-error; height: auto; }
    """

    def __init__(
        self,
        title: str,
        value: str = "",
        placeholder: str = "",
        parse: Callable[[str], Any] = str,
        errors: tuple[type[Exception], ...] = (ValueError,),
    ) -> None:
        super().__init__(title)
        self._value = value
        self._placeholder = placeholder
        self._parse = parse
        self._errors = errors

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(self._title)
            yield Input(value=self._value, placeholder=self._placeholder, id="prompt-input")
            yield Label("", id="prompt-error")
            yield Label("enter: OK · escape: cancel", classes="dim")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        try:
            value = self._parse(event.value)
        except self._errors as exc:
            self.query_one("#prompt-error", Label).update(str(exc))
            return
        self.dismiss(value)


class PickScreen(_Dialog):
    """Pick one of a few named choices (workload)."""

    DEFAULT_CSS = """
    PickScreen { align: center middle; }
    PickScreen > Vertical { width: 90; max-width: 95%; height: auto; border: thick $primary;
                            background: $surface; padding: 0 1; }
    PickScreen OptionList { height: auto; max-height: 16; }
    """

    def __init__(self, title: str, choices: Sequence[tuple[str, str]], current: str | None = None) -> None:
        super().__init__(title)
        self._choices = choices
        self._current = current

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(self._title)
            options = [
                Option(Text.assemble((name, "bold"), "  ", (desc, "dim")), id=name) for name, desc in self._choices
            ]
            yield OptionList(*options, id="pick-list")

    def on_mount(self) -> None:
        ol = self.query_one(OptionList)
        names = [n for n, _ in self._choices]
        if self._current in names:
            ol.highlighted = names.index(self._current)
        ol.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)


class KnobsScreen(_Dialog):
    """Every knob with what it does: a checkbox for an on/off knob, a select for a valued one.

    A knob that cannot be on here (``refusals``: the catalog's reason) is shown disabled with
    the reason. Apply (the button, or ``a`` from anywhere in the panel) checks the whole setting
    with ``check`` (a reason stays in the panel) and dismisses with the ``Knobs``; escape cancels.
    Tab moves between the knobs that can change, space toggles one.
    """

    BINDINGS = [Binding("a", "apply", "Apply")]

    DEFAULT_CSS = """
    KnobsScreen { align: center middle; }
    KnobsScreen > Vertical { width: 100; max-width: 100%; height: auto; max-height: 100%;
                             border: thick $primary; background: $surface; padding: 0 1; }
    KnobsScreen #knob-rows { height: auto; max-height: 18; }
    KnobsScreen .knob-row { height: auto; }
    KnobsScreen .knob-name { width: 16; text-style: bold; }
    KnobsScreen .knob-row Checkbox { width: 21; }
    KnobsScreen .knob-row Select { width: 21; }
    KnobsScreen .knob-about { width: 1fr; color: $text-muted; }
    KnobsScreen .knob-about.-refused { color: $text-warning; }
    KnobsScreen #knobs-error { color: $text-error; height: auto; }
    KnobsScreen #knobs-buttons { height: 1; }
    KnobsScreen #knobs-buttons Label { margin-left: 2; color: $text-muted; }
    """

    def __init__(
        self,
        title: str,
        knobs: Knobs,
        refusals: dict[str, str | None],
        check: Callable[[Knobs], str | None] = lambda _: None,
    ) -> None:
        super().__init__(title)
        self._knobs = knobs
        self._refusals = refusals
        self._check = check

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(self._title)
            rows = VerticalScroll(id="knob-rows")
            rows.can_focus = False  # tab goes from knob to knob, not to the list around them
            with rows:
                for info in KNOBS.values():
                    yield self._row(info)
            yield Label("", id="knobs-error")
            with Horizontal(id="knobs-buttons"):
                yield Button("Apply", id="knobs-apply", variant="primary", compact=True)
                yield Label("a applies them all at once · tab next · space toggles · escape cancels")

    def _row(self, info: KnobInfo) -> Horizontal:
        why = self._refusals.get(info.name)
        value, wid = self._knobs.value(info.name), f"knob-{info.name}"
        control: Checkbox | Select[str]
        if info.values == (OFF, ON):
            control = Checkbox("on", value == ON, id=wid, disabled=bool(why), compact=True)
        else:
            control = Select(
                [(v, v) for v in info.values], value=value, allow_blank=False, id=wid, disabled=bool(why), compact=True
            )
        about = Label(why or info.summary, classes="knob-about" + (" -refused" if why else ""))
        return Horizontal(Label(info.name, classes="knob-name"), control, about, classes="knob-row")

    def on_mount(self) -> None:
        enabled = [w for w in self.query(".knob-row Checkbox, .knob-row Select") if not w.disabled]
        if enabled:
            enabled[0].focus()

    def chosen(self) -> Knobs:
        """The setting the panel shows now."""
        values: dict[str, str] = {}
        for info in KNOBS.values():
            w = self.query_one(f"#knob-{info.name}")
            if isinstance(w, Checkbox):
                values[info.name] = ON if w.value else OFF
            elif isinstance(w, Select) and isinstance(w.value, str):
                values[info.name] = w.value
        return Knobs(values)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "knobs-apply":
            self.apply()

    def action_apply(self) -> None:
        self.apply()

    def apply(self) -> None:
        knobs = self.chosen()
        why = self._check(knobs)
        if why:
            self.query_one("#knobs-error", Label).update(f"✗ {why}")
            return
        self.dismiss(knobs)


def plain_text(widget: Static, width: int | None = None) -> str:
    """What a Static shows, as plain text (for tests and debugging)."""
    from io import StringIO

    from rich.console import Console

    console = Console(
        file=StringIO(), width=width or max(20, widget.size.width or 120), color_system=None, legacy_windows=False
    )
    content = widget.content
    console.print(content if not isinstance(content, str) else Text(content))
    return console.file.getvalue()  # type: ignore[attr-defined]
