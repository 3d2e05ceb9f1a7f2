"""The dashboard's ``c`` key: the run recorded to a CSV (the format of ``gpudash --record``) at a
path the user gives, a new file in a folder that exists; ``c`` again stops it.

``RecordKeyApp`` stands between ``ShotsApp`` (``shots.py``) and ``PaletteApp`` (``palette.py``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from gpudash.tui.screens import PromptScreen
from gpudash.tui.shots import ShotsApp


class RecordKeyApp(ShotsApp):
    """The ``c`` key: a recording of the run started at a path asked for, or stopped."""

    redraw: Callable[..., None]  # the app's: the screen drawn again (``force``: even where nothing changed)

    def default_record_path(self) -> str:
        name = self.stamped_name(".csv")
        return os.path.join(self.save_dir, name) if self.save_dir else name

    def action_record(self) -> None:
        if self.replay:
            return
        if self.controller.recording.recorder is not None:
            self.tell([self.controller.recording.stop()])
            self.redraw(force=True)
            return
        prompt = PromptScreen(
            "Record this run to CSV (same format as gpudash --record)",
            value=self.default_record_path(),
            parse=new_file_path,
            errors=(ValueError,),
        )
        self.push_screen(prompt, lambda path: None if not path else self.start_recording(path))

    def start_recording(self, path: str) -> None:
        self.tell([self.controller.recording.start(path)])
        self.redraw(force=True)


def new_file_path(text: str) -> str:
    """A path for a new recording, or ValueError saying why not (exists, no such folder)."""
    if not text.strip():
        raise ValueError("give a file name")
    p = Path(text.strip()).expanduser()
    if p.exists():
        raise ValueError(f"{p} exists; choose another name")
    if not p.parent.exists():
        raise ValueError(f"folder {p.parent} does not exist")
    return str(p)
