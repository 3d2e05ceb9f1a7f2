"""The compile table (key ``g``): a compiled job's functions with their compiles, recompiles and
seconds, each recompile's cause with its fix, and each graph break's line and reason, live
(``gpudash.core.compile_table``, from the run's compile events). A replay's CSV keeps the events'
lines, not their figures: it shows those lines."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.binding import Binding

from gpudash.core.compile_table import CompileTable
from gpudash.tui.screens import LiveReport

NOTHING = "nothing compiled yet (a job that calls torch.compile, or the compile knob, shows its compiles here)"


def compile_report(table: CompileTable, lines: Sequence[str]) -> Group | Text:
    """The functions' table and the graph breaks' table; where the figures are not known (a replay),
    the compile events' lines."""
    if not table.functions and not table.breaks:
        return Text("\n".join(lines[-20:]) if lines else NOTHING, style="" if lines else "dim")
    functions = Table(expand=True, title=f"compiled: {table.seconds:.2f} s in all")
    for name, justify in (("function", "left"), ("line", "left"), ("compiles", "right"), ("seconds", "right")):
        functions.add_column(name, justify=justify, no_wrap=name != "function")  # type: ignore[arg-type]
    functions.add_column("recompiled because (count) — fix", overflow="fold")
    for f in table.functions.values():
        causes = "; ".join(
            f"{c} ({n}) — {f.fixes.get(c, '')}" for c, n in sorted(f.reasons.items(), key=lambda kv: -kv[1])
        )
        if f.limit:
            causes = "HIT THE RECOMPILE LIMIT: runs uncompiled (eager) from then on" + (f"; {causes}" if causes else "")
        style = "bold red" if f.limit else ""
        functions.add_row(f.name, f.where, str(f.compiles), f"{f.seconds:.2f}", Text(causes, style=style))
    parts: list[Table | Text] = [functions]
    if table.breaks:
        breaks = Table(expand=True, title=f"graph breaks: {len(table.breaks)}")
        breaks.add_column("line", no_wrap=True)
        breaks.add_column("reason")
        breaks.add_column("count", justify="right", no_wrap=True)
        breaks.add_column("fix", overflow="fold")
        for b in table.breaks.values():
            breaks.add_row(b.where, b.reason, str(b.count), b.fix)
        parts.append(breaks)
    return Group(*parts)


class CompileScreen(LiveReport):
    """The live compile table over the dashboard; escape or ``g`` closes it."""

    HEADING = "Compiles: what torch.compile compiled, recompiled and broke, by line"
    BODY_ID = "compile-table"
    BINDINGS = [Binding("escape,q,g", "dismiss", "Close")]

    def __init__(self, read: Callable[[], tuple[CompileTable, Sequence[str]]]) -> None:
        super().__init__()
        self._read = read

    def report(self) -> Group | Text:
        return compile_report(*self._read())
