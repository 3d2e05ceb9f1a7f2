"""Progress of a sweep on stderr with ``rich.progress``: the configuration, the repeat, the ETA.

``quiet``: nothing at all. Lines (one per finished configuration × repeat) go through the
progress console, above the bar on a terminal and as plain lines elsewhere.
"""

from __future__ import annotations

from typing import Any


class SweepProgress:
    """A bar of configuration × repeat measurements; ``update`` moves it within one."""

    def __init__(self, quiet: bool, total: int) -> None:
        self.quiet = quiet
        self.total = total
        self.done = 0
        self._bar: Any = None
        self._task: Any = None

    def __enter__(self) -> SweepProgress:
        if self.quiet:
            return self
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        console = Console(stderr=True)
        self._bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=console,
            transient=True,
            speed_estimate_period=600.0,
        )
        self._bar.start()
        self._task = self._bar.add_task("starting", total=self.total)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    def start_unit(self, name: str, repeat: int, repeats: int) -> None:
        """A configuration × repeat begins (the switch, then warm-up and measuring)."""
        if self._bar is not None:
            which = f"repeat {repeat}/{repeats}" if repeat <= repeats else f"extra round {repeat} (--until-ci)"
            self._bar.update(self._task, description=f"{name} · {which}", completed=self.done)

    def status(self, text: str) -> None:
        """What happens between measurements (starting a family's workload process)."""
        if self._bar is not None:
            self._bar.update(self._task, description=text)

    def update(self, fraction: float) -> None:
        """How far the current measurement is (0..1)."""
        if self._bar is not None:
            self._bar.update(self._task, completed=self.done + min(max(fraction, 0.0), 0.99))

    def finish_unit(self, line: str) -> None:
        """A configuration × repeat is done: the bar moves on and ``line`` is printed."""
        self.done += 1
        if self._bar is not None:
            self._bar.update(self._task, completed=self.done)
            self._bar.console.print(line, markup=False, highlight=False)

    def add(self, units: int) -> None:
        """More measurements (another --until-ci round)."""
        self.total += units
        if self._bar is not None:
            self._bar.update(self._task, total=self.total)
