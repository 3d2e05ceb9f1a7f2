"""What runs now, typed: one configuration of a run. Torch-free.

A run's configuration (family, variant, batch size, knobs, device, world size) travels up from the
workload process inside the ``started`` and ``changed`` events. On the wire and in a CSV it is
text (``Event.details``); ``Running.from_details`` reads it back, once, when the event is built
(``Event.running``), so no reader parses a batch size again. ``gpudash.core.runstate.RunState``
follows it through a run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

NO_KNOBS = "none"  # the knobs' text form when none is on (``workloads.knobs.Knobs.text``)

ConfigKey = tuple[str, str, int, str]  # (workload, variant, batch size, knobs text): one configuration


@dataclass(frozen=True)
class Running:
    """One configuration of a run, as the workload process reports it."""

    workload: str
    variant: str
    batch_size: int
    knobs: str = NO_KNOBS
    device: str = ""
    world_size: int = 1

    @property
    def key(self) -> ConfigKey:
        """What makes two stretches of a run the same configuration (the device never changes)."""
        return (self.workload, self.variant, self.batch_size, self.knobs)

    def details(self) -> dict[str, str]:
        """The text form an event carries (the CSV's ``details`` column)."""
        d = {
            "workload": self.workload,
            "variant": self.variant,
            "batch_size": str(self.batch_size),
            "knobs": self.knobs,
        }
        if self.device:
            d["device"] = self.device
        if self.world_size != 1:
            d["world_size"] = str(self.world_size)
        return d

    @classmethod
    def from_details(cls, d: Mapping[str, str]) -> Running | None:
        """The configuration an event's details name; None when they name none. A batch size or
        world size that is not a whole number (a hand-edited file) reads as 0 and 1."""
        workload = d.get("workload", "")
        if not workload:
            return None
        return cls(
            workload=workload,
            variant=d.get("variant", ""),
            batch_size=_whole(d.get("batch_size"), 0),
            knobs=d.get("knobs") or NO_KNOBS,
            device=d.get("device", ""),
            world_size=_whole(d.get("world_size"), 1),
        )


def _whole(text: str | None, default: int) -> int:
    text = (text or "").strip()
    return int(text) if text.isdigit() else default
