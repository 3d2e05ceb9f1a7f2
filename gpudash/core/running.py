"""What runs now, typed: one configuration of a run. Torch-free.

A run's configuration (family, variant, batch size, knobs, device, world size) travels up from the
workload process as itself (``Event.running``); a recording keeps it as a JSON object
(``recording.event_data``) and reads it back whole, so no reader parses a batch size out of text.
The event's details also carry its text form (``details()``), for the CSV's reader by eye.
``gpudash.core.runstate.RunState`` follows it through a run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass

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

    def said(self) -> dict[str, str | int]:
        """``details()``' keys with their typed values (run.json's ``started`` holds them)."""
        return {k: getattr(self, k) for k in self.details()}

    def as_dict(self) -> dict[str, object]:
        """The JSON object a recording keeps (``from_dict`` reads it back)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, object]) -> Running:
        """``as_dict``'s object back; TypeError where a field is not of its kind (a hostile file)."""
        text = {
            k: d.get(k, default)
            for k, default in (("workload", ""), ("variant", ""), ("knobs", NO_KNOBS), ("device", ""))
        }
        whole = {k: d.get(k, default) for k, default in (("batch_size", 0), ("world_size", 1))}
        if not all(isinstance(v, str) for v in text.values()) or not text["workload"]:
            raise TypeError(f"a configuration's names are text, its workload named: {d!r}")
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in whole.values()):
            raise TypeError(f"a configuration's batch and world sizes are whole numbers: {d!r}")
        return cls(**text, **whole)  # type: ignore[arg-type]  # checked above
