"""The model FLOPs of one training step, counted once on an eager step with torch's own
``torch.utils.flop_counter.FlopCounterMode`` (matmuls, convolutions, attention: forward and
backward), before any compile or graph capture — the numerator of model FLOPs utilisation.

Torch-free at import (the step's ``torch`` is given). A step whose FLOPs torch cannot count (a
compiled-only region, custom kernels) counts what it can; a count of zero says the step's FLOPs are
not known, never that it made none.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class StepFlops:
    """One eager step's counted FLOPs: the total and by operator (the largest first)."""

    total: int
    by_op: tuple[tuple[str, int], ...]

    @property
    def known(self) -> bool:
        return self.total > 0


def count_step_flops(step: Callable[[], Any], torch: Any) -> StepFlops:
    """Run ``step()`` once under ``FlopCounterMode`` and return what it counted."""
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with counter:
        step()
    per_op: dict[str, int] = {}
    for ops in counter.get_flop_counts().values():  # by module; "Global" holds every op once
        for op, n in ops.items():
            per_op[str(op)] = max(per_op.get(str(op), 0), int(n))
    by_op = tuple(sorted(per_op.items(), key=lambda kv: -kv[1]))
    return StepFlops(total=int(counter.get_total_flops()), by_op=by_op)
