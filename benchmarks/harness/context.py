"""What a case writes as it runs (``Run``): its document's comments, lines and tables in order, its
named figures and its arms' values. Each table row and line is also said on stderr as it comes, so
a long run shows its progress and a run cut short has said what it had."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from benchmarks.harness.result import Block, Figure, Series, Table


class Run:
    """One run of one case: the parameters it got and what it has written so far."""

    def __init__(self, params: Any, quiet: bool = False) -> None:
        self.params = params
        self.quiet = quiet
        self.blocks: list[Block] = []
        self.figures: dict[str, Figure] = {}
        self.series: dict[str, Series] = {}
        self.data: dict[str, Any] = {}
        self.device: str | None = None  # the device the case ran on, where it decides (cuda when it has one)
        self.failed: str | None = None  # why the case's own check failed (the result is kept all the same)
        self.stamp: dict[str, Any] | None = None  # a run measured elsewhere: its own machine (else the harness stamps)

    def progress(self, text: str) -> None:
        """A line on stderr, not kept."""
        if not self.quiet:
            print(text, file=sys.stderr, flush=True)

    def _append(self, kind: str, lines: list[str]) -> None:
        last = self.blocks[-1] if self.blocks else None
        if last is not None and last.kind == kind and kind in ("comment", "lines"):
            last.lines.extend(lines)
        else:
            self.blocks.append(Block(kind, lines))
        for line in lines:
            self.progress(f"# {line}" if kind == "comment" else line)

    def comment(self, text: str) -> None:
        """A "# " line: a header's, or the title of what follows."""
        self._append("comment", [text])

    def line(self, text: str = "") -> None:
        """A line of text (empty: a blank line)."""
        self._append("lines", [text])

    def table(self, columns: Sequence[str], align: Sequence[str] = ()) -> Table:
        """A new table in the document; its rows are added with ``Table.add`` (``row`` says them too)."""
        t = Table(list(columns), [], list(align) or ["---"] * len(columns))
        self.blocks.append(Block("table", table=t))
        self.progress("| " + " | ".join(t.columns) + " |")
        return t

    def row(self, table: Table, *cells: object) -> None:
        """A row added to ``table`` and said."""
        row = table.add(*cells)
        self.progress("| " + " | ".join(row) + " |")

    def say(self, name: str, figure: Figure) -> Figure:
        """A named figure, kept and written as a line (its text)."""
        self.figures[name] = figure
        self.line(figure.text)
        return figure

    def keep(self, name: str, figure: Figure) -> Figure:
        """A named figure kept without a line of its own (a table's cell says it)."""
        self.figures[name] = figure
        return figure

    def values(self, arm: str, values: Sequence[float], unit: str = "", higher_is_better: bool = True) -> None:
        """One arm's measurements, kept for ``compare``."""
        self.series[arm] = Series([float(v) for v in values], unit, higher_is_better)
