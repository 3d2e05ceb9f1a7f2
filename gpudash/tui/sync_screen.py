"""The sync table (key ``y``): which lines of the step make the host wait for the GPU, live.

One row per site (``gpudash.boot.gpudash_boot.sync_sites``): waits per step, share of all waits, the file and
line, and the line's source; the most frequent first, then an "other" row. Redrawn twice a second
from the dashboard's state, for the configuration running now.
"""

from __future__ import annotations

from collections.abc import Callable

from rich.table import Table
from rich.text import Text
from textual.binding import Binding

from gpudash.boot.gpudash_boot.sync_table import Site
from gpudash.core.protocol import Sample, SyncSites, config_key
from gpudash.tui.screens import LiveReport

NO_SYNCS = "no host-device syncs in the step"


def sync_table(
    sites: SyncSites | None, sample: Sample | None, device: str | None, replay: bool = False
) -> Table | Text:
    """The table for the configuration running now, or one line saying why there is none."""
    if replay and sites is None:
        return Text(
            "no sync table recorded for this configuration (the recording's JSON has none: syncs are "
            "counted on CUDA runs)",
            style="dim",
        )
    if device is not None and not device.startswith("cuda"):
        return Text(f"host-device syncs are counted on CUDA devices only (this run: {device})", style="dim")
    if sites is None or (sample is not None and config_key(sites) != config_key(sample)):
        return Text("waiting for this configuration's first steps…", style="dim")
    table = sites.table
    if table.total == 0:
        note = f"\n({sites.not_counted}: torch.cuda.synchronize() and Event.synchronize() not counted)"
        return Text(f"{NO_SYNCS} ({table.steps} steps)" + (note if sites.not_counted else ""), style="green")
    out = Table(expand=True, title=f"{sites.configuration}: {table.per_step:.3g} waits a step over {table.steps} steps")
    out.add_column("waits/step", justify="right", no_wrap=True)
    out.add_column("share", justify="right", no_wrap=True)
    out.add_column("site", no_wrap=True)
    out.add_column("line", overflow="ellipsis")
    for row in table.rows:
        out.add_row(f"{row.per_step(table.steps):.3g}", f"{100 * table.share(row):.0f}%", *_cells(row.site))
    if sites.not_counted:
        out.caption = f"not counted: torch.cuda.synchronize() and Event.synchronize() ({sites.not_counted})"
    return out


def _cells(site: Site | None) -> tuple[str, str]:
    if site is None:
        return "other", ""
    notes = site.notes()
    where = site.where + (f" ({', '.join(notes)})" if notes else "")
    return where, site.text or "(source not readable)"


class SyncSitesScreen(LiveReport):
    """The live sync table over the dashboard; escape or ``y`` closes it."""

    HEADING = "Host-device syncs: where the step waits for the GPU"
    BODY_ID = "sync-table"
    BINDINGS = [Binding("escape,q,y", "dismiss", "Close")]

    def __init__(self, read: Callable[[], tuple[SyncSites | None, Sample | None, str | None, bool]]) -> None:
        super().__init__()
        self._read = read

    def report(self) -> Table | Text:
        return sync_table(*self._read())
