"""A job's wall time by phase and its goodput, as its account says them at its end (``Goodput``):
the ``phases`` "measured" event carries it as its typed data beside its line (both made from the
job's account, ``job.wall_time.JobPhases``), run.json keeps it (``phases``, ``wall_s``,
``goodput_pct``), and the dashboard shows its goodput: the line is never read back. Ground floor:
read by the job's session, the recordings and the dashboard."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from gpudash.core.lenient import float_or_none


@dataclass(frozen=True)
class Goodput:
    """Each phase's seconds (training included; they sum to ``wall_s``), and training's share of the
    wall time less what was not the job's own (None: no time had passed)."""

    KIND: ClassVar[str] = "goodput"

    seconds: dict[str, float] = field(default_factory=dict)
    wall_s: float = 0.0
    pct: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"seconds": dict(self.seconds), "wall_s": self.wall_s, "pct": self.pct}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Goodput:
        seconds = d.get("seconds")
        each = (
            {k: s for k, v in seconds.items() if (s := float_or_none(v)) is not None}
            if isinstance(seconds, dict)
            else {}
        )
        return cls(each, float_or_none(d.get("wall_s")) or 0.0, float_or_none(d.get("pct")))
