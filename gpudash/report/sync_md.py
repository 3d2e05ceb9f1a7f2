"""The sync table as Markdown: each configuration's host-device syncs by source line, for
``report.md`` (from a recording's JSON, ``sync_sites``) and ``tune.md`` (from a diagnosis)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpudash.boot.gpudash_boot.sync_table import SyncTable
from gpudash.core.textfmt import markdown_table, strip_controls

NO_SYNCS = "no host-device syncs in the step"


def table_lines(name: str, table: SyncTable, not_counted: str = "") -> list[str]:
    """One configuration's rows: waits per step, share, site, the line's source."""
    lines = [f"**{name}**: {table.per_step:.3g} waits a step over {table.steps} steps", ""]
    if table.total == 0:
        lines[0] = f"**{name}**: {NO_SYNCS} ({table.steps} steps)"
    else:
        rows = []
        for row in table.rows:
            site = row.site
            if site is None:
                where, text = "other", ""
            else:
                notes = site.notes(quote="`")
                where = f"`{site.where}`" + (f" ({', '.join(notes)})" if notes else "")
                text = f"`{_plain(site.text)}`" if site.text else "(source not readable)"
            rows.append([f"{row.per_step(table.steps):.3g}", f"{100 * table.share(row):.0f}%", where, text])
        lines += markdown_table(["waits/step", "share", "site", "line"], rows).splitlines()
    if not_counted:
        lines += ["", f"*torch.cuda.synchronize() and Event.synchronize() not counted: {_plain(not_counted)}*"]
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
        lines += table_lines(_plain(str(name)), table, str(d.get("not_counted") or ""))
    return lines if len(lines) > 2 else []


def _plain(text: str) -> str:
    """Text read from a file, safe to print and inside backticks (``markdown_table`` escapes ``|``)."""
    return strip_controls(text).replace("`", "'")
