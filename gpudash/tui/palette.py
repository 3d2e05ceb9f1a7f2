"""What the dashboard offers, listed: the help screen (``?``), the command palette (``ctrl+p``) and
the screens they open (the sync sites, the compiles, a stall's report).

``PaletteApp`` stands between ``RecordKeyApp`` (``record_key.py``) and ``GpuDashApp`` (``app.py``).
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial
from typing import ClassVar

from textual.app import SystemCommand
from textual.screen import Screen

from gpudash.tui import actions
from gpudash.tui.chart_specs import ChartSpec
from gpudash.tui.compile_screen import CompileScreen
from gpudash.tui.gpu_rows import GPM_EXPLAINED
from gpudash.tui.job_notices import STALL_COMMAND
from gpudash.tui.record_key import RecordKeyApp
from gpudash.tui.screens import FAMILY_TITLE, HelpScreen, KeyRow
from gpudash.tui.shots import COPY_FORMATS
from gpudash.tui.stall_screen import StallScreen
from gpudash.tui.sync_screen import SyncSitesScreen


class PaletteApp(RecordKeyApp):
    """The help screen, the command palette and the screens they open."""

    CHART_SPECS: ClassVar[tuple[ChartSpec, ...]]  # the app's charts, in order: the help screen explains each

    def key_help(self) -> list[KeyRow]:
        """The help screen's keys: each under its heading, in the headings' order."""
        shown = self.shown_actions()
        out = [(a.heading, a.key, "leave" if (self.replay and a.name == "quit") else a.help) for a in shown]
        out.append((actions.SCREEN, "ctrl+p", "command palette: every action by name, Copy stats as Markdown / CSV"))
        out.append(
            (actions.SCREEN, "mouse", "click a chart: the values under the cursor · wheel: zoom the time axis (0: all)")
        )
        return sorted(out, key=lambda row: actions.GROUPS.index(row[0]))

    def action_help(self) -> None:
        charts = [(c.title, c.help) for c in self.CHART_SPECS] + [("GPU lines (GPM's gauges)", GPM_EXPLAINED)]
        title = f"gpudash — your job, live: {self.job.command}" if self.job is not None else FAMILY_TITLE
        log_path = self.controller.info.log_path
        self.push_screen(HelpScreen(self.key_help(), charts, self.replay, log_path=log_path, title=title))

    def action_sync_sites(self) -> None:
        state = self.state
        self.push_screen(SyncSitesScreen(lambda: (state.sync_sites, state.last_sample, state.device, self.replay)))

    def action_compiles(self) -> None:
        state = self.state
        self.push_screen(CompileScreen(lambda: (state.compiles, state.compile_lines)))

    def show_stall(self) -> None:
        self.push_screen(StallScreen(self.state.phases, self.replay))

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        # Textual's own "Screenshot" saves to ~/Downloads (missing on most GPU servers): ours replaces it
        yield from (c for c in super().get_system_commands(screen) if c.title != "Screenshot")
        for kind in COPY_FORMATS:
            yield SystemCommand(
                f"Copy stats as {kind}",
                f"the stats table as {kind}, to the clipboard (OSC 52: works over ssh; in tmux with set-clipboard on)",
                partial(self.copy_stats, kind),
            )
        for a in self.shown_actions():
            if a.name != "quit":
                yield SystemCommand(f"{a.title} ({a.key})", a.help, getattr(self, f"action_{a.name}"))
        if self.state.phases.stall is not None:  # a job that stalled: its report, every thread
            yield SystemCommand(STALL_COMMAND, "the latest stall report: a line per thread of the job", self.show_stall)
        if not self.replay and not self.controller.is_job:
            for k in actions.knob_commands():
                yield SystemCommand(k.title, k.help, partial(self.set_knob, k.knob, k.value))
