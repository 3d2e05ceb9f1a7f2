"""What a user's job already does, as its hooks say it at its first step: its training DataLoader's
arguments and where it was made (``site``: "/path/train.py:39"), its backend flags, what its model
does (autocast, compiled, its forward's line), its data-parallel wrapper's arguments. Text keys and
text values, as said; no text is parsed back for them. The job's "started" event carries them in its
typed data (``core.start_note.StartNote.settings``), run.json keeps them as ``started.settings``, and a
diagnosis reads them from its evidence. Ground floor: read by the job's session, the recordings,
diagnose and tune."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def settings_of(value: Any) -> dict[str, str]:
    """The settings ``value`` holds (a rank's first-step message's, a run.json's): text keys with
    text, number or boolean values, as text; {} for anything else (an older hooks' joined string,
    a hostile file)."""
    if not isinstance(value, Mapping):
        return {}
    scalar = (str, int, float, bool)
    return {k: str(v) for k, v in value.items() if isinstance(k, str) and isinstance(v, scalar)}
