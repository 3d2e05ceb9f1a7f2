"""A case run's result as data: what it measured (its arms' values, its figures, its tables), the
document it printed, the machine it ran on; read and written as JSON, one file per case run
(``NAME.result.json``), its schema versioned (``SCHEMA``).

The document is a list of blocks in the order printed: ``comment`` ("# " lines: a header, a part's
title), ``lines`` (text, blank lines included), ``table``, ``heading`` (a Markdown heading, its
level) and ``stderr`` (what the run printed on stderr beside its output: torch's warnings).
``benchmarks.harness.render`` writes it out; a reader of figures never parses it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

SCHEMA = 1  # the version of this file's layout: bumped when a field changes meaning
SUFFIX = ".result.json"
BLOCK_KINDS = ("comment", "lines", "table", "heading", "stderr")


@dataclass
class Table:
    """A table as printed: its columns, each column's alignment cell (``---``, ``--:``…) and its rows of cells."""

    columns: list[str]
    rows: list[list[str]] = field(default_factory=list)
    align: list[str] = field(default_factory=list)

    def add(self, *cells: object) -> list[str]:
        """A row of cells (each as ``str`` writes it), appended and returned."""
        row = [str(c) for c in cells]
        self.rows.append(row)
        return row

    def row(self, first: str) -> list[str]:
        """The first row whose first cell starts with ``first``."""
        found = next((r for r in self.rows if r[0].startswith(first)), None)
        if found is None:
            raise KeyError(f"no row {first!r} in the table {self.columns}")
        return found

    def column(self, name: str) -> list[str]:
        """One column's cells, by its heading."""
        i = self.columns.index(name)
        return [r[i] for r in self.rows]


@dataclass
class Block:
    """One part of the printed document (see the module's docstring for the kinds)."""

    kind: str
    lines: list[str] = field(default_factory=list)
    table: Table | None = None
    level: int = 0  # a heading's

    def __post_init__(self) -> None:
        if self.kind not in BLOCK_KINDS:
            raise ValueError(f"unknown block kind {self.kind!r}")


@dataclass
class Figure:
    """One figure a run measured, as numbers and as printed.

    ``kind``: ``comparison`` (``value`` is a ratio, with its interval and gpudash's verdict),
    ``estimate`` (a mean with its interval) or ``value`` (a number alone). ``target`` and ``met``:
    the goal it is judged against ("≥ 0.98") and the judgement ("met", "not met", "not shown")."""

    kind: str
    text: str
    value: float | None = None
    low: float | None = None
    high: float | None = None
    verdict: str | None = None
    n: int | None = None
    unit: str = ""
    target: str | None = None
    met: str | None = None


@dataclass
class Series:
    """One arm's measurements, in the order taken (a value a round, a pair, a block)."""

    values: list[float]
    unit: str = ""
    higher_is_better: bool = True


@dataclass
class Result:
    """One run of one case (or a published output converted into this form: ``source``)."""

    case: str
    command: str
    stamp: dict[str, Any] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)
    claim: str = ""
    anchor: str = ""
    series: dict[str, Series] = field(default_factory=dict)
    figures: dict[str, Figure] = field(default_factory=dict)
    blocks: list[Block] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)
    source: str | None = None  # the published output this was converted from (None: run by the harness)
    schema: int = SCHEMA

    # -- reading ----------------------------------------------------------------------------------
    def figure(self, name: str) -> Figure:
        if name not in self.figures:
            raise KeyError(f"{self.case}: no figure {name!r} (it has {sorted(self.figures)})")
        return self.figures[name]

    def tables(self) -> list[Table]:
        return [b.table for b in self.blocks if b.table is not None]

    def table(self, first_column: str) -> Table:
        """The first table whose first column is ``first_column``."""
        found = next((t for t in self.tables() if t.columns[0] == first_column), None)
        if found is None:
            raise KeyError(f"{self.case}: no table whose first column is {first_column!r}")
        return found

    def comments(self) -> list[str]:
        """The text of every comment line, in order (a header first)."""
        return [line for b in self.blocks if b.kind == "comment" for line in b.lines]

    def text_lines(self) -> list[str]:
        """Every line of its ``lines`` blocks that holds something."""
        return [line for b in self.blocks if b.kind == "lines" for line in b.lines if line.strip()]

    def sections(self, level: int = 2) -> Iterator[tuple[str, list[Block]]]:
        """(heading, the blocks under it) for each heading of ``level``."""
        heading: str | None = None
        under: list[Block] = []
        for b in self.blocks:
            if b.kind == "heading" and b.level == level:
                if heading is not None:
                    yield heading, under
                heading, under = b.lines[0], []
            elif heading is not None:
                under.append(b)
        if heading is not None:
            yield heading, under

    # -- JSON -------------------------------------------------------------------------------------
    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1, ensure_ascii=False) + "\n"

    def write(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.to_json(), encoding="utf-8")
        return path


def from_dict(doc: dict[str, Any]) -> Result:
    """A result from its JSON object; a schema this code does not know is refused."""
    if doc.get("schema") != SCHEMA:
        raise ValueError(f"a result of schema {doc.get('schema')!r}; this harness reads schema {SCHEMA}")
    known = {f.name for f in fields(Result)}
    unknown = set(doc) - known
    if unknown:
        raise ValueError(f"a result with unknown fields {sorted(unknown)}")
    blocks = [_block(b) for b in doc.get("blocks", [])]
    series = {k: Series(**v) for k, v in doc.get("series", {}).items()}
    figures = {k: Figure(**v) for k, v in doc.get("figures", {}).items()}
    rest = {k: v for k, v in doc.items() if k not in ("blocks", "series", "figures")}
    return Result(**rest, blocks=blocks, series=series, figures=figures)


def _block(doc: dict[str, Any]) -> Block:
    table = doc.get("table")
    return Block(doc["kind"], list(doc.get("lines", [])), Table(**table) if table else None, doc.get("level", 0))


def load(path: Path) -> Result:
    """The result kept in ``path`` (a ``*.result.json``)."""
    return from_dict(json.loads(path.read_text(encoding="utf-8")))
