"""A two-stage family's stages timed alone (``StageTimes``): the engine's "stages" event carries it
as its typed data, the sweep reads it from there, and a recording keeps it whole. Ground floor:
read by the engine, the sweep and the recordings alike."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

from gpudash.core.metrics import overlap_bound


@dataclass(frozen=True)
class StageTimes:
    """Each stage alone (ms per call) and the overlap bound they imply: a pipeline that overlaps the
    two perfectly runs at 1000 / max(t1, t2) steps/s."""

    KIND: ClassVar[str] = "stages"

    stage1: str
    stage1_ms: float
    stage2: str
    stage2_ms: float

    @property
    def bound(self) -> float:
        """The overlap bound in steps/s."""
        bound = overlap_bound((self.stage1_ms, self.stage2_ms))
        if bound is None:
            raise ValueError(f"no overlap bound: {self.describe()}")
        return bound

    @classmethod
    def mean_of(cls, times: list[StageTimes]) -> StageTimes | None:
        """Each stage's mean over ``times`` (None: no timings)."""
        if not times:
            return None
        first = times[0]
        return cls(
            first.stage1,
            sum(t.stage1_ms for t in times) / len(times),
            first.stage2,
            sum(t.stage2_ms for t in times) / len(times),
        )

    def describe(self) -> str:
        """ "encode 0.98 ms, train 2.91 ms alone"."""
        return f"{self.stage1} {self.stage1_ms:.3g} ms, {self.stage2} {self.stage2_ms:.3g} ms alone"

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> StageTimes:
        return cls(str(d["stage1"]), float(d["stage1_ms"]), str(d["stage2"]), float(d["stage2_ms"]))
