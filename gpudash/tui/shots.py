"""The dashboard's screenshots (``s``, ``ctrl+s``, the palette) and copies of its stats table
(the palette's "Copy stats as …"), and the stamped file names of what it saves.

``ShotsApp`` stands between ``SteeringApp`` (``steering.py``) and ``GpuDashApp`` (``app.py``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import datetime
from functools import partial

from gpudash.job.command import slug
from gpudash.tui.notices import Severity
from gpudash.tui.stats_panel import StatsTable, stats_table
from gpudash.tui.steering import SteeringApp

COPY_FORMATS = {"Markdown": StatsTable.markdown, "CSV": StatsTable.csv}  # the palette's "Copy stats as …"


class ShotsApp(SteeringApp):
    """Screenshots and copies of the stats table."""

    wall_clock: Callable[[], datetime]  # set by the app: the stamps of the files it names

    def stamped_name(self, suffix: str) -> str:
        """``gpudash-<workload>-<date>-<time><suffix>``: a file name for something of this run (a
        job's workload without its ``job:``: ``gpudash-train.py-…``)."""
        stamp = self.wall_clock().strftime("%Y%m%d-%H%M%S")
        return f"gpudash-{slug(self.state.run.workload or 'run')}-{stamp}{suffix}"

    def action_screenshot(self, filename: str | None = None, path: str | None = None) -> None:
        """Save the screen as SVG (s, ctrl+s, the palette) a moment later, once a palette that ran
        this has closed; into ``path``, else ``save_dir``, else the working directory."""
        self.set_timer(0.1, partial(self.save_svg, filename, path))

    def save_svg(self, filename: str | None = None, path: str | None = None) -> str | None:
        """Write the screenshot now and say where (or why not); returns its path."""
        folder = os.path.abspath(path or self.save_dir or os.getcwd())
        name = filename or self.stamped_name(".svg")
        n = 2
        while filename is None and os.path.exists(os.path.join(folder, name)):  # two in one second
            name, n = self.stamped_name(f"-{n}.svg"), n + 1
        try:
            saved = self.save_screenshot(name, folder)
        except OSError as exc:
            self.say(f"could not save the screenshot in {folder}: {exc.strerror or exc}", Severity.ERROR, toast=True)
            return None
        self.say(f"screenshot saved: {saved}", toast=True)
        return saved

    def copy_stats(self, kind: str) -> None:
        """The stats panel's table to the clipboard as ``kind`` (a key of ``COPY_FORMATS``)."""
        table = stats_table(self.state)
        self.copy_to_clipboard(COPY_FORMATS[kind](table))
        self.say(
            f"stats table copied as {kind} ({len(table.headers)} metrics × {len(table.rows)} rows); "
            "paste it anywhere (OSC 52)",
            toast=True,
        )
