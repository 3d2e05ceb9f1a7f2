"""A compiled job's steps at a new shape (its step records' ``new_shape``: a recompile, new kernels,
a CUDA graph recorded again), kept out of the steady rate and tallied: how many ran, their training
seconds and share of the training, what they cost over the steady pace, and the fix; a step at a
new shape before the first steady one is the first shape's warm-up, not a change of shape. The lead
rank's steps, less those gpudash slowed (profiled). A step at a new shape that ran about as fast
as a steady one (a dynamic graph at a new size: no kernel built) paid nothing and is tallied as
steady. Torch-free."""

from __future__ import annotations

from dataclasses import dataclass, field

from gpudash.core.compile_reasons import RANGE, SHAPE
from gpudash.core.compile_table import CompileTable
from gpudash.core.events import SHAPES, Event, EventKind
from gpudash.core.run_facts import RunFacts
from gpudash.job.step_record import StepRecord

GENERAL_FIX = (
    "mark the changing dim dynamic (torch._dynamo.mark_dynamic(x, dim), or torch.compile(..., dynamic=True)), "
    "or pad the inputs to a few bucket lengths"
)


# a step at a new shape that ran within this many times the steady step, with no compile or other
# phase before it, paid nothing for it (a dynamic graph's new size: no kernel built): tallied as steady
PAID_OVER = 2.0


@dataclass(frozen=True)
class FreshStep:
    """A training step at a new shape: its training seconds, the seconds of the phases before it
    (its compile, timed apart), and whether it recorded CUDA graphs again."""

    train_s: float
    phase_s: float
    graphs_again: bool


@dataclass
class ShapeSteps:
    """The training steps at a new shape against the steady ones."""

    fresh: list[FreshStep] = field(default_factory=list)
    base_steps: int = 0
    base_s: float = 0.0

    def add(self, record: StepRecord) -> None:
        if record.train_s is None or record.profiled:
            return
        if record.new_shape:
            if self.base_steps:  # before the first steady step: the first shape's warm-up, no change of shape
                self.fresh.append(FreshStep(record.train_s, record.phase_s, record.graphs_again))
        else:
            self.base_steps += 1
            self.base_s += record.train_s

    def _paid(self) -> list[FreshStep]:
        """The new-shape steps that compiled, or ran over ``PAID_OVER`` steady steps (``fresh`` holds
        steps after a steady one only)."""
        bar = PAID_OVER * self.base_s / max(1, self.base_steps)
        return [step for step in self.fresh if step.train_s > bar or step.phase_s > 0]

    @property
    def steps(self) -> int:
        return len(self._paid())

    @property
    def seconds(self) -> float:
        """The training seconds of the steps that paid for a new shape."""
        return sum(step.train_s for step in self._paid())

    @property
    def phase_s(self) -> float:
        """The seconds of the phases just before them (their compiles), timed apart from the training."""
        return sum(step.phase_s for step in self._paid())

    @property
    def graphs_again(self) -> int:
        return sum(1 for step in self._paid() if step.graphs_again)

    @property
    def steady_steps(self) -> int:
        return self.base_steps + len(self.fresh) - self.steps

    @property
    def steady_s(self) -> float:
        return self.base_s + sum(step.train_s for step in self.fresh) - self.seconds

    def line(self, fix: str = "") -> str:
        """ "37 steps ran at a new shape: 6.1 s, 38% of the training (165 ms a step against 6.4 ms at
        shapes already compiled: 5.9 s more); with the phases before them (their compiles), timed
        apart, 9.3 s in all — fix"; "" where none did."""
        if not self.steps:
            return ""
        total = self.seconds + self.steady_s
        said = f"{self.steps} step{'s' if self.steps > 1 else ''} ran at a new shape: {self.seconds:.2g} s"
        said += f", {100 * self.seconds / total:.0f}% of the training" if total > 0 else ""
        steady = self.steady_s / self.steady_steps  # (a steady step came before any counted here)
        extra = self.seconds - self.steps * steady
        said += f" ({_duration(self.seconds / self.steps)} a step against {_duration(steady)} at shapes"
        said += f" already compiled: {extra:.2g} s more)" if extra > 0 else " already compiled: no more)"
        if self.phase_s > 0:
            whole = self.seconds + self.phase_s
            said += f"; with the phases before them (their compiles), timed apart, {whole:.2g} s in all"
        if self.graphs_again:
            said += f"; {self.graphs_again} of them recorded the module's CUDA graphs again"
        return f"{said} — {fix or GENERAL_FIX}"

    def event(self, time_s: float, fix: str = "") -> Event | None:
        """The "measured" event of the tally (None where no step ran at a new shape)."""
        if not self.steps:
            return None
        facts = RunFacts(
            {
                "new_shape_steps": self.steps,
                "new_shape_s": _figure(self.seconds),
                "steady_steps": self.steady_steps,
                "steady_s": _figure(self.steady_s),
                "graphs_again_steps": self.graphs_again,
                "new_shape_phase_s": _figure(self.phase_s),
            }
        )
        return Event(time_s, EventKind.MEASURED, what=SHAPES, message=self.line(fix), data=facts)


def _figure(seconds: float) -> float:
    """Seconds to four figures, as run.json keeps them."""
    return float(f"{seconds:.4g}")


def _duration(seconds: float) -> str:
    """ "6.4 ms", "3.2 s" (three figures)."""
    return f"{1e3 * seconds:.3g} ms" if seconds < 1 else f"{seconds:.3g} s"


def shape_fix(table: CompileTable) -> str:
    """The fix of the latest recompile whose cause is a size (its dim and tensor named), else the general one."""
    for fn in table.functions.values():
        for cause, kind in reversed(list(fn.kinds.items())):
            if kind in (SHAPE, RANGE) and fn.fixes.get(cause):
                return fn.fixes[cause]
    return GENERAL_FIX
