"""The sync table as Markdown: each configuration's host-device syncs by source line, for
``report.md`` (from a recording's JSON, ``sync_sites``) and ``tune.md`` (from a diagnosis)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpudash.core.sync_sites import SyncTable
from gpudash.core.textfmt import strip_controls

NO_SYNCS = "no host-device syncs in the step"


def table_lines(name: str, table: SyncTable, not_counted: str = "") -> list[str]:
    """One configuration's rows: waits per step, share, site, the line's source."""
    lines = [f"**{name}**: {table.per_step:.3g} waits a step over {table.steps} steps", ""]
    if table.total == 0:
        lines[0] = f"**{name}**: {NO_SYNCS} ({table.steps} steps)"
    else:
        lines += ["| waits/step | share | site | line |", "|--:|--:|---|---|"]
        for row in table.rows:
            site = row.site
            if site is None:
                where, text = "other", ""
            else:
                notes = [n for n, on in (("in backward", site.backward), ("compiled region", site.compiled)) if on]
                if site.package:
                    caller = site.called_from.where if site.called_from else "?"
                    notes.append(f"in {site.package}, called from {caller}")
                elif site.called_from is not None:
                    notes.append(f"called from `{site.called_from.where}`")
                where = f"`{site.where}`" + (f" ({', '.join(notes)})" if notes else "")
                text = f"`{_cell(site.text)}`" if site.text else "(source not readable)"
            lines.append(f"| {row.per_step(table.steps):.3g} | {100 * table.share(row):.0f}% | {where} | {text} |")
    if not_counted:
        lines += ["", f"*torch.cuda.synchronize() and Event.synchronize() not counted: {_cell(not_counted)}*"]
    return [*lines, ""]


def section(tables: Mapping[str, Any]) -> list[str]:
    """``## Host-device syncs by line`` for a recording's ``sync_sites`` (empty when it has none)."""
    if not tables:
        return []
    lines = ["### Host-device syncs by line", ""]
    for name, d in tables.items():
        try:
            table = SyncTable.from_dict(d)
        except (KeyError, TypeError, ValueError):
            continue  # a hand-edited or foreign entry: left out, the rest shown
        lines += table_lines(_cell(str(name)), table, str(d.get("not_counted") or ""))
    return lines if len(lines) > 2 else []


def _cell(text: str) -> str:
    """Text safe in a Markdown table cell and inside backticks."""
    return strip_controls(text).replace("|", "\\|").replace("`", "'")
