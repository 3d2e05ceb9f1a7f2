"""A compiled job's steps at a new shape (its step records' ``new_shape``: a recompile, new kernels,
a CUDA graph recorded again), kept out of the steady rate and tallied: how many ran, their training
seconds and share of the training, what they cost over the steady pace, and the fix. The lead
rank's steps, less those gpudash slowed (profiled). Torch-free."""

from __future__ import annotations

from dataclasses import dataclass

from gpudash.core.compile_reasons import RANGE, SHAPE
from gpudash.core.compile_table import CompileTable
from gpudash.core.events import SHAPES, Event, EventKind
from gpudash.job.step_record import StepRecord

GENERAL_FIX = (
    "mark the changing dim dynamic (torch._dynamo.mark_dynamic(x, dim), or torch.compile(..., dynamic=True)), "
    "or pad the inputs to a few bucket lengths"
)


@dataclass
class ShapeSteps:
    """The training steps at a new shape against the steady ones."""

    steps: int = 0
    seconds: float = 0.0
    steady_steps: int = 0
    steady_s: float = 0.0
    graphs_again: int = 0  # of the steps at a new shape, those that recorded their CUDA graphs again

    def add(self, record: StepRecord) -> None:
        if record.train_s is None or record.profiled:
            return
        if record.new_shape:
            self.steps += 1
            self.seconds += record.train_s
            self.graphs_again += record.graphs_again
        else:
            self.steady_steps += 1
            self.steady_s += record.train_s

    def line(self, fix: str = "") -> str:
        """ "37 steps ran at a new shape: 6.1 s, 38% of the training (165 ms a step against 6.4 ms at
        shapes already compiled: 5.9 s more) — fix"; "" where none did."""
        if not self.steps:
            return ""
        total = self.seconds + self.steady_s
        said = f"{self.steps} step{'s' if self.steps > 1 else ''} ran at a new shape: {self.seconds:.2g} s"
        said += f", {100 * self.seconds / total:.0f}% of the training" if total > 0 else ""
        if self.steady_steps:
            steady = self.steady_s / self.steady_steps
            extra = self.seconds - self.steps * steady
            said += f" ({1e3 * self.seconds / self.steps:.3g} ms a step against {1e3 * steady:.3g} ms at shapes"
            said += f" already compiled: {extra:.2g} s more)" if extra > 0 else " already compiled: no more)"
        if self.graphs_again:
            said += f"; {self.graphs_again} of them recorded the module's CUDA graphs again"
        return f"{said} — {fix or GENERAL_FIX}"

    def event(self, time_s: float, fix: str = "") -> Event | None:
        """The "measured" event of the tally (None where no step ran at a new shape)."""
        if not self.steps:
            return None
        details = {
            "new_shape_steps": str(self.steps),
            "new_shape_s": f"{self.seconds:.4g}",
            "steady_steps": str(self.steady_steps),
            "steady_s": f"{self.steady_s:.4g}",
            "graphs_again_steps": str(self.graphs_again),
        }
        return Event(time_s, EventKind.MEASURED, what=SHAPES, message=self.line(fix), details=details)


def shape_fix(table: CompileTable) -> str:
    """The fix of the latest recompile whose cause is a size (its dim and tensor named), else the general one."""
    for fn in table.functions.values():
        for cause, kind in reversed(list(fn.kinds.items())):
            if kind in (SHAPE, RANGE) and fn.fixes.get(cause):
                return fn.fixes[cause]
    return GENERAL_FIX
