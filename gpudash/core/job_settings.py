"""What a user's job already does (``JobSettings``), as its hooks say it at its first step: its
training DataLoader's arguments and where it was made (``site``: "/path/train.py:39"), its backend
flags, what its model does (autocast, compiled, its forward's line), its data-parallel wrapper's
arguments. Text keys and text values, as said; no text is parsed back for them. The job's "started"
event carries it as its typed data, run.json keeps it as ``started.settings``, and a diagnosis reads
it from its evidence. Ground floor: read by the job's session, the recordings, diagnose and tune."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar


def settings_of(value: Any) -> dict[str, str]:
    """The settings ``value`` holds (a rank's first-step message's, a run.json's): text keys with
    text, number or boolean values, as text; {} for anything else (an older hooks' joined string,
    a hostile file)."""
    if not isinstance(value, Mapping):
        return {}
    scalar = (str, int, float, bool)
    return {k: str(v) for k, v in value.items() if isinstance(k, str) and isinstance(v, scalar)}


@dataclass(frozen=True)
class JobSettings:
    """The settings a job's lead rank said at its first step (the started event's typed data)."""

    KIND: ClassVar[str] = "job_settings"

    values: dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"values": dict(self.values)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> JobSettings:
        return cls(settings_of(d.get("values")))
