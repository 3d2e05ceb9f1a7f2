"""A job's wall time by phase and its goodput, as its account says them at its end (``Goodput``):
the ``phases`` "measured" event carries it as its typed data beside its line (both made from the
job's account, ``job.wall_time.JobPhases``), run.json keeps it (``phases``, ``wall_s``,
``goodput_pct``), and the dashboard shows its goodput: the line is never read back. Ground floor:
read by the job's session, the recordings and the dashboard."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from gpudash.core.events import Event
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


@dataclass(frozen=True)
class PhaseSpan:
    """A "phase" event's data: the phase's seconds once it ended (0: it was none after all), None
    while it is under way. The event's ``after`` keeps them as text for the CSV's reader by eye."""

    KIND: ClassVar[str] = "phase"

    seconds: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"seconds": self.seconds}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PhaseSpan:
        """``as_dict``'s object back; TypeError where its seconds are not a number (a hostile file)."""
        seconds = d.get("seconds")
        if seconds is not None and (not isinstance(seconds, (int, float)) or isinstance(seconds, bool)):
            raise TypeError(f"a phase's seconds are a number: {seconds!r}")
        return cls(seconds)


def span_of(e: Event) -> PhaseSpan | None:
    """A phase event's span (None: not a phase event's data)."""
    return e.data if isinstance(e.data, PhaseSpan) else None


@dataclass(frozen=True)
class StallReport:
    """A "stalled" event's data: how long the job had gone without a step when it was told, and where
    each of its threads waits, one line each (the stall screen and run.json's ``stalls``)."""

    KIND: ClassVar[str] = "stall"

    stalled_s: float
    where: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {"stalled_s": self.stalled_s, "where": list(self.where)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> StallReport:
        """``as_dict``'s object back; TypeError where a field is not of its kind (a hostile file)."""
        seconds, where = d["stalled_s"], d.get("where") or []
        if not isinstance(seconds, (int, float)) or isinstance(seconds, bool):
            raise TypeError(f"a stall's seconds are a number: {seconds!r}")
        if not isinstance(where, list) or not all(isinstance(line, str) for line in where):
            raise TypeError(f"where a stalled job waits is lines of text: {where!r}")
        return cls(seconds, tuple(where))


def stall_of(e: Event) -> StallReport | None:
    """A stalled event's report (None: not a stall's data)."""
    return e.data if isinstance(e.data, StallReport) else None
