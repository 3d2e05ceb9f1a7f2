"""A printed output (a report gpudash wrote, a script's recorded output) taken in as a result's
document: its lines as blocks (``benchmarks.harness.result``), tables as tables. Taking in is exact:
``blocks_of`` refuses text its blocks would not write back as it was (``render.markdown``), so a
result holds what was printed, never a reading of it."""

from __future__ import annotations

import re

from benchmarks.harness.result import Block, Table

STDERR = re.compile(r"UserWarning|^  torch\._C|Warning: .*synchroniz")  # what torch printed on stderr beside the output
HEADING = re.compile(r"^(#{1,6}) (.*)$")
ALIGN = re.compile(r"^:?-+:?$")


def cells(line: str) -> list[str] | None:
    """A table row's cells, split at the pipes that are not escaped (None: not a row this writes back as it was)."""
    if not (line.startswith("| ") and line.endswith(" |")):
        return None
    parts = [c for c in re.split(r"(?<!\\) \| ", line[2:-2])]
    return parts if "| " + " | ".join(parts) + " |" == line else None


def table_of(lines: list[str]) -> Table | None:
    """A table from its heading row, its alignment row and its rows (None: not one written back as it was)."""
    head = cells(lines[0])
    align = lines[1][1:-1].split("|") if len(lines) > 1 and lines[1].startswith("|") and lines[1].endswith("|") else []
    rows = [cells(line) for line in lines[2:]]
    if head is None or len(align) != len(head) or not all(ALIGN.match(a) for a in align) or None in rows:
        return None
    return Table(head, [r for r in rows if r is not None], align)


def _flush(blocks: list[Block], kind: str, lines: list[str]) -> None:
    if lines:
        if blocks and blocks[-1].kind == kind and kind in ("lines", "comment", "stderr"):
            blocks[-1].lines.extend(lines)
        else:
            blocks.append(Block(kind, list(lines)))


def blocks_of(text: str, markdown: bool = False) -> list[Block]:
    """``text`` as blocks. ``markdown``: its ``#`` lines are headings (a report), else comments (a
    script's header lines); fenced code is kept as lines either way."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the file's last newline: markdown() writes it back
    blocks: list[Block] = []
    i, fenced = 0, False
    while i < len(lines):
        line = lines[i]
        if line.lstrip().startswith("```"):
            fenced = not fenced
        if not fenced and line.startswith("|") and i + 1 < len(lines) and lines[i + 1].startswith("|-"):
            end = i + 2
            while end < len(lines) and lines[end].startswith("| "):
                end += 1
            table = table_of(lines[i:end])
            if table is not None:
                blocks.append(Block("table", table=table))
                i = end
                continue
        blocks.append(_line_block(line, markdown, fenced))
        i += 1
    merged: list[Block] = []
    for b in blocks:
        if b.kind in ("table", "heading"):
            merged.append(b)
        else:
            _flush(merged, b.kind, b.lines)
    return merged


def _line_block(line: str, markdown: bool, fenced: bool) -> Block:
    heading = HEADING.match(line)
    if heading and not fenced:
        if markdown:
            return Block("heading", [heading.group(2)], level=len(heading.group(1)))
        if heading.group(1) == "#":
            return Block("comment", [heading.group(2)])
    if STDERR.search(line) or (line.startswith("/") and "Warning" in line):
        return Block("stderr", [line])
    return Block("lines", [line])
