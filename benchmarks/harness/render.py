"""A result written out as Markdown: its header (the command and the machine, for a harness run) and
its document's blocks in order. ``page=True`` is how docs/BENCHMARKS.md quotes a run: comment lines
without their ``#`` and what went to stderr left out."""

from __future__ import annotations

from benchmarks.harness.result import Block, Result, Table
from benchmarks.harness.stamp import stamp_line


def table_lines(t: Table) -> list[str]:
    """A table's Markdown lines: the heading row, the alignment row, a row a line."""
    align = t.align or ["---"] * len(t.columns)
    return [_row(t.columns), "|" + "|".join(align) + "|", *(_row(r) for r in t.rows)]


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def block_lines(b: Block, page: bool = False) -> list[str]:
    """One block's lines (none for stderr on the page)."""
    if b.kind == "table":
        assert b.table is not None
        return table_lines(b.table)
    if b.kind == "comment":
        return list(b.lines) if page else [f"# {line}" for line in b.lines]
    if b.kind == "heading":
        return ["#" * b.level + " " + b.lines[0]]
    if b.kind == "stderr" and page:
        return []
    return list(b.lines)


def header_lines(r: Result) -> list[str]:
    """What a harness run says first: its command and its machine (a converted output has its own)."""
    if r.source is not None:
        return []
    return [f"# `{r.command}`", f"# {stamp_line(r.stamp)}"]


def markdown(r: Result, page: bool = False) -> str:
    """The whole result as Markdown (the exact text of a converted output, ``page=False``)."""
    lines = ([] if page else header_lines(r)) + [line for b in r.blocks for line in block_lines(b, page)]
    return "\n".join(lines) + "\n"


def blocks_text(blocks: list[Block], page: bool = True) -> str:
    """Some blocks of a document as text, joined as they print."""
    return "\n".join(line for b in blocks for line in block_lines(b, page))
