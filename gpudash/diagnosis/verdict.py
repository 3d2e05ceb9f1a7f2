"""A diagnosis' verdict: what bounds the step (``Bound``), the evidence in words and what to try
next, as one line and as ``--json``'s document."""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass

from gpudash.boot.gpudash_boot.sync_table import SyncTable
from gpudash.diagnosis.evidence import Evidence


class Bound(enum.StrEnum):
    """What bounds the step, in the verdict's words."""

    INPUT = "input-bound"
    SYNC = "sync-bound"
    HOST = "host/launch-bound"
    GPU_COMPUTE = "GPU-bound (compute)"
    GPU_MEMORY = "GPU-bound (memory)"
    CPU = "CPU-bound"
    SMALL_KERNELS = "busy, SMs idle"
    COMM = "communication-bound"
    WAIT = "waiting for another rank"
    COMPILE = "compile-bound"
    UNTOLD = "no profiler window"  # a GPU job's untraced steps alone: the GPU's share of them not known


TENSORS_IDLE = "tensors-idle"  # a bf16 step whose tensor cores idle: compute-bound, advice of its own
OUTSIDE_TORCH = "outside-torch"  # a host-bound step whose host time is mostly outside torch: the script's own work


@dataclass(frozen=True)
class Diagnosis:
    bound: Bound
    why: str  # the evidence, in words
    advice: str  # what to try next
    case: str = ""  # a case of the bound with advice of its own (TENSORS_IDLE); "": the bound's

    def line(self) -> str:
        """One line for the dashboard, the CSV's event and ``gpudash diagnose``."""
        return f"{self.bound}: {self.why} — {self.advice}"

    def as_fields(self) -> dict[str, str]:
        """Its own fields, for a recording (``from_fields`` reads them back)."""
        return {"bound": self.bound.value, "why": self.why, "advice": self.advice, "case": self.case}

    @classmethod
    def from_fields(cls, d: dict[str, str]) -> Diagnosis:
        return cls(Bound(d["bound"]), str(d["why"]), str(d["advice"]), str(d.get("case", "")))

    def as_dict(self, evidence: Evidence) -> dict[str, object]:
        """For ``--json``: the verdict, its words and every figure it rests on."""
        return {
            "bound": str(self.bound),
            "why": self.why,
            "advice": self.advice,
            "evidence": {
                f.name: value.as_dict() if isinstance(value, SyncTable) else value
                for f in dataclasses.fields(evidence)
                if (value := getattr(evidence, f.name)) is not None
            },
        }
