"""A compiled job's compile table as Markdown, for ``report.md`` (from a recording's JSON,
``compile``): each compiled function with its compiles, seconds and recompiles' causes with their
fixes, a function past the recompile limit, and each graph break's line and reason."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpudash.core.lenient import float_or_none
from gpudash.core.textfmt import markdown_table, strip_controls


def section(meta: Mapping[str, Any]) -> list[str]:
    """``### Compiles`` of a recording's ``compile`` (empty where it compiled nothing)."""
    table = meta.get("compile")
    if not isinstance(table, dict) or not (table.get("functions") or table.get("graph_breaks")):
        return []
    lines = ["### Compiles", "", f"torch.compile: {_num(table.get('seconds'))} s compiling in all.", ""]
    shapes = meta.get("new_shapes")
    if isinstance(shapes, dict) and shapes.get("line"):  # kept out of the steady rate above, and what they cost
        lines += [f"Steps at a new shape, left out of the steps/s above: {_text(shapes['line'])}.", ""]
    rows = [_function_row(f) for f in _dicts(table.get("functions"))]
    if rows:
        header = ["function", "line", "compiles", "seconds", "recompiled because — fix"]
        lines += [*markdown_table(header, rows).splitlines(), ""]
    breaks = [
        [f"`{_text(b.get('where'))}`", _text(b.get("reason")), _text(b.get("count")), _text(b.get("fix"))]
        for b in _dicts(table.get("graph_breaks"))
    ]
    if breaks:
        lines += markdown_table(["graph break at", "reason", "count", "fix"], breaks).splitlines()
        lines.append("")
    return lines


def _function_row(f: dict[str, Any]) -> list[str]:
    """A function's row: its name, line, compiles, seconds, and its recompiles' causes with their fixes."""
    reasons = _dicts(f.get("reasons"))
    causes = "; ".join(f"{_text(r.get('cause'))} ×{_text(r.get('count'))} — {_text(r.get('fix'))}" for r in reasons)
    if f.get("recompile_limit_hit"):
        limit = "**hit the recompile limit: runs uncompiled (eager) from then on**"
        causes = f"{limit}; {causes}" if causes else limit
    where = f"`{_text(f.get('where'))}`"
    return [_text(f.get("function")), where, _text(f.get("compiles")), _num(f.get("seconds")), causes]


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _text(value: Any) -> str:
    return strip_controls(str(value)).replace("|", "\\|") if value is not None else ""


def _num(value: Any) -> str:
    number = float_or_none(value)
    return "–" if number is None else f"{number:.2f}"
