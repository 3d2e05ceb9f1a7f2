"""What a profiler window's "trace" event says, typed (its ``data``): where its trace is, when the
window began, its steps and wall time, its figures by name and the kernels that took the most.
The engine and the job's session make it (``TraceFigures.note``); the dashboard's marker, line and
notice, the ranks' line and the link's weighing read it whole. Torch-free."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar


@dataclass(frozen=True)
class TraceNote:
    """One profiler window's answer. ``figures``: every figure by its name, as a number (GPU busy
    and idle %, overlap, kernels a step, host and GPU ms a step, each stream's and stage's, the
    collectives' by kind, their bus bandwidth, the overlap bound and the share of it the run
    reached, how much slower the traced steps ran): the names the CSV's readers have always read."""

    KIND: ClassVar[str] = "trace"
    path: str  # the Chrome trace, for Perfetto ("": none written)
    steps: int
    wall_ms: float
    start_s: float | None = None  # when the window began, in the run's seconds (None: not said)
    figures: dict[str, float] = field(default_factory=dict)
    kernels: tuple[tuple[str, float], ...] = ()  # the kernels that took the most: (name, ms a traced step)
    link: str = ""  # the link between the GPUs the collectives' bus bandwidth is weighed against

    def figure(self, name: str) -> float | None:
        """The figure of that name (None: not measured in this window)."""
        return self.figures.get(name)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)  # (its tuples JSON writes as lists: ``from_dict`` reads them back)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TraceNote:
        """``as_dict``'s object back; TypeError where a field is not of its kind (a hostile file)."""
        figures = d.get("figures") or {}
        if not isinstance(figures, dict) or not all(_number(v) for v in figures.values()):
            raise TypeError(f"a trace's figures are numbers by name: {figures!r}")
        steps, wall, start = d["steps"], d["wall_ms"], d.get("start_s")
        if not (isinstance(steps, int) and _number(wall) and (start is None or _number(start))):
            raise TypeError(f"a trace's steps, wall and start are numbers: {d!r}")
        kernels = tuple((str(name), float(ms)) for name, ms in d.get("kernels") or ())
        named = {str(k): v for k, v in figures.items()}
        return cls(str(d["path"]), steps, wall, start, named, kernels, str(d.get("link") or ""))


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
