"""The dashboard's modal screens: help, and the dialogs its keys open (a prompt, a pick, the knobs);
``LiveReport``, what the live reports over the dashboard (the sync table, the stall report) share."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Checkbox, Input, Label, OptionList, Select, Static
from textual.widgets.option_list import Option

from workloads.knobs import KNOBS, OFF, ON, KnobInfo, Knobs

REDRAW_S = 0.5  # how often a live report is redrawn


class LiveReport(ModalScreen[None]):
    """A report over the dashboard, redrawn every ``REDRAW_S`` while it is open: ``HEADING``, then
    ``report()`` in the Static ``#BODY_ID``, then how to close it."""

    BINDINGS = [Binding("escape,q", "dismiss", "Close")]
    DEFAULT_CSS = """
    LiveReport { align: center middle; }
    LiveReport > VerticalScroll { width: 95%; height: auto; max-height: 90%; border: thick $primary;
                                  background: $surface; padding: 0 1; }
    """
    HEADING = ""
    BODY_ID = ""

    def report(self) -> RenderableType:
        """The report as it stands now."""
        raise NotImplementedError

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(Text(self.HEADING, style="bold"))
            yield Static(id=self.BODY_ID)
            yield Static(Text("escape closes", style="dim"))

    def on_mount(self) -> None:
        self.redraw()
        self.set_interval(REDRAW_S, self.redraw)

    def redraw(self) -> None:
        self.query_one(f"#{self.BODY_ID}", Static).update(self.report())


FAMILY_TITLE = "gpudash — what pipelining, GPU augmentation and host-device syncs do to throughput"
KeyRow = tuple[str, str, str]  # (the heading it stands under, the key, what it does)
STATS_HELP = (
    "now: the latest sample. this cfg: the mean since the last change ± its 95% interval (batch means; "
    "the first second is warm-up and left out; 'too short' until there are enough samples). prev cfg: the "
    "same for the configuration before.",
    "change: this vs prev in percent, green/red only when the difference is real (significant and over "
    "2%); otherwise 'no change' or 'within noise'; while a side is short, how much longer it needs. The "
    "title line gives steps/s's change with its 95% interval, +8% (−2 … +19%): a ratio's interval is not "
    "symmetric; Copy stats gives every column's. Another workload is not compared; after a batch-size "
    "change samples/s and the GPU's figures are, steps/s, step times and J/step are not.",
    "J/step: NVML energy over the steps done.",
    "last trace (in the panel's top line): the latest profiler window's figures (T): GPU busy and idle "
    "share of the window, multi-stream overlap, kernels per step; a magenta 'trace' line on the charts "
    "marks where it began. Its .json.gz file opens in ui.perfetto.dev.",
)


def _heading(text: str) -> Text:
    return Text(f"\n{text}", style="bold underline")


def _rows(rows: Sequence[tuple[str, str]], key_width: int) -> Table:
    """Two columns: the key (or a chart's name) and what it does, wrapped under itself."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(width=key_width, no_wrap=True, style="bold cyan")
    grid.add_column(ratio=1)
    for key, what in rows:
        grid.add_row(key, what)
    return grid


class HelpScreen(ModalScreen[None]):
    """Every key, under a short heading each, and what each chart means."""

    BINDINGS = [Binding("escape,q,question_mark,f1", "dismiss", "Close")]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 90%; max-width: 100; height: 90%; border: thick $primary;
                                  background: $surface; padding: 0 1; }
    """

    def __init__(
        self,
        keys: Sequence[KeyRow],
        charts: Sequence[tuple[str, str]],
        replay: bool,
        log_path: str | None = None,
        title: str = FAMILY_TITLE,
    ) -> None:
        super().__init__()
        self._log_path = log_path
        self._keys = keys
        self._charts = charts
        self._replay = replay
        self._title = title

    def compose(self) -> ComposeResult:
        parts: list[RenderableType] = [Text(self._title, style="bold")]
        if self._replay:
            parts.append(Text("Replay of a recorded run: read-only, controls are off.", style="magenta"))
        for heading in dict.fromkeys(h for h, _, _ in self._keys):
            parts += [_heading(heading), _rows([(k, what) for h, k, what in self._keys if h == heading], 8)]
        parts.append(_heading("Charts (one shared time axis; a red line marks every change)"))
        for title, helptext in self._charts:
            parts += [Text(title, style="bold"), _rows([("", helptext)], 2)]
        parts += [_heading("Stats panel"), _rows([("", line) for line in STATS_HELP], 2)]
        if self._log_path:
            parts += [_heading("The workload's own output (warnings, tracebacks) goes to"), Text(f"  {self._log_path}")]
        parts.append(Text("\nPress escape to close.", style="dim"))
        with VerticalScroll():
            yield Static(Group(*parts))


class _Dialog(ModalScreen[Any]):
    """A small modal: its title over its ``body()`` in one box; escape cancels (dismissed with None)."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, title: str) -> None:
        super().__init__()
        self._title = title

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(self._title)
            yield from self.body()

    def body(self) -> ComposeResult:
        """What the dialog shows under its title."""
        raise NotImplementedError

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

    def body(self) -> ComposeResult:
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

    def body(self) -> ComposeResult:
        options = [Option(Text.assemble((name, "bold"), "  ", (desc, "dim")), id=name) for name, desc in self._choices]
        yield OptionList(*options, id="pick-list")

    def on_mount(self) -> None:
        ol = self.query_one(OptionList)
        names = [n for n, _ in self._choices]
        if self._current in names:
            ol.highlighted = names.index(self._current)
        ol.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)


KNOB_ROWS = 18  # the knobs' list at the most
KNOBS_CHROME_ROWS = 4  # the panel's border (2), its title and the buttons' row


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
    KnobsScreen #knob-rows { height: auto; max-height: 18; }  /* then _fit_rows: what the screen leaves */
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

    def body(self) -> ComposeResult:
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
        self._fit_rows()

    def on_resize(self) -> None:
        self._fit_rows()

    def _fit_rows(self) -> None:
        """Give the knobs what the screen leaves (at most 18 rows): they scroll, and the Apply
        button and the error line stay on screen however small the terminal (40×12)."""
        chrome = KNOBS_CHROME_ROWS + self.query_one("#knobs-error", Label).size.height
        self.query_one("#knob-rows").styles.max_height = max(1, min(KNOB_ROWS, self.size.height - chrome))

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


class TuneResultScreen(_Dialog):
    """What a tune found, and whether to run it here: enter applies the winner, escape keeps the
    configuration that ran (the run resumes either way)."""

    BINDINGS = [Binding("escape", "cancel", "Keep"), Binding("enter", "apply", "Apply")]
    DEFAULT_CSS = """
    TuneResultScreen { align: center middle; }
    TuneResultScreen > Vertical { width: 100; max-width: 95%; height: auto; border: thick $primary;
                                  background: $surface; padding: 1 2; }
    TuneResultScreen Label { width: 100%; }
    """

    def __init__(self, title: str, lines: Sequence[str], can_apply: bool) -> None:
        super().__init__(title)
        self._lines, self._can_apply = lines, can_apply

    def body(self) -> ComposeResult:
        for line in self._lines:
            yield Label(line)
        keys = "enter: run the winner here · escape: keep this configuration" if self._can_apply else "escape: close"
        yield Label(f"{keys} (the run resumes either way)", classes="dim")

    def action_apply(self) -> None:
        self.dismiss(True if self._can_apply else None)
