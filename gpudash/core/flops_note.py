"""What a "flops" event says, typed (its ``data``): a configuration's model FLOPs a step and the
peak they are a share of, or why MFU is blank, and for a job what the count cost it. The engine
and the job's session make it (``ModelCount.note``); the dashboard's MFU and a recording read it
whole. Torch-free."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, ClassVar


@dataclass(frozen=True)
class FlopsNote:
    """One configuration's count: FLOPs a step (None: not counted), the dtype they ran in ("mixed":
    several), the peak TFLOP/s MFU is a share of and where it comes from, why MFU is blank ("": it
    is not), and what counting cost a job (its counted step's seconds against an untraced step's)."""

    KIND: ClassVar[str] = "flops"
    flops_per_step: int | None
    dtype: str
    peak_tflops: float | None
    peak_source: str
    blank: str = ""
    count_step: int | None = None  # the job's step that was counted
    count_step_s: float | None = None  # ... its seconds
    untraced_s: float | None = None  # ... and an untraced step's

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> FlopsNote:
        """``as_dict``'s object back; TypeError where a field is not of its kind (a hostile file)."""
        note = cls(**d)
        texts = (note.dtype, note.peak_source, note.blank)
        numbers = (note.peak_tflops, note.count_step_s, note.untraced_s)
        wholes = (note.flops_per_step, note.count_step)
        if not all(isinstance(t, str) for t in texts):
            raise TypeError(f"a FLOPs note's names are text: {d!r}")
        if not all(n is None or (isinstance(n, (int, float)) and not isinstance(n, bool)) for n in numbers):
            raise TypeError(f"a FLOPs note's figures are numbers: {d!r}")
        if not all(n is None or (isinstance(n, int) and not isinstance(n, bool)) for n in wholes):
            raise TypeError(f"a FLOPs note's counts are whole numbers: {d!r}")
        return note
