"""A compiled job that keeps recompiling through its training is **compile-bound**: its recompiles
after the first step (``gpudash.core.compile_table``, dynamo's own seconds for each) take at least
``COMPILE_SHARE`` of the time it spends training and recompiling, and they go on (one in the second
half of the steps so far; ``limit_note`` says where they stopped at the recompile limit). The
verdict names the time lost, the function, line and cause that cost the most with the fix for that
cause, and what the steps would take without the recompiles (the steps between compiles, whose
training seconds leave every compile out). Torch-free.
"""

from __future__ import annotations

from gpudash.core.compile_table import CompileTable
from gpudash.diagnosis.verdict import Bound, Diagnosis

COMPILE_SHARE = 0.10  # of the time training and recompiling, recompiles: compile-bound at or above
MIN_RECOMPILES = 2  # during training: one recompile is a new shape once, not a habit


def compile_bound(table: CompileTable | None, training_s: float, steps: int) -> Diagnosis | None:
    """The verdict, where the recompiles during training (after step 1) are ``COMPILE_SHARE`` or more
    of ``training_s`` (the steps' own seconds) and them; None otherwise."""
    if table is None:
        return None
    again = table.in_training()
    lost = sum(r.seconds for r in again)
    if len(again) < MIN_RECOMPILES or training_s <= 0 or lost < COMPILE_SHARE * (training_s + lost):
        return None
    if again[-1].step <= steps // 2:  # none in the second half of the steps so far: they have stopped
        return None
    by_cause: dict[tuple[str, str, str], list[float]] = {}
    for r in again:
        by_cause.setdefault((r.function, r.where, r.cause), []).append(r.seconds)
    (function, where, cause), seconds = max(by_cause.items(), key=lambda kv: sum(kv[1]))
    fix = next((f.fixes.get(cause, "") for f in table.functions.values() if (f.name, f.where) == (function, where)), "")
    share = 100 * lost / (training_s + lost)
    why = (
        f"{len(again)} recompiles during training took {lost:.3g} s, {share:.0f}% of the time training and "
        f"recompiling; the most: {function} at {where}, {cause} ({len(seconds)}×, {sum(seconds):.3g} s). "
        f"Without them the {steps} steps would take {training_s:.3g} s instead of {training_s + lost:.3g} s "
        f"({(training_s + lost) / training_s:.2f}× faster)"
    )
    return Diagnosis(Bound.COMPILE, why, fix or "keep the compiled function's inputs the same shape and type")


def limit_note(table: CompileTable | None, now_s: float | None = None, step: int | None = None) -> str:
    """Where a function hit the recompile limit and runs uncompiled since, and (the run's seconds and
    step now given) for how long: said beside any verdict."""
    if table is None:
        return ""
    hit = [f"{f.name} at {f.where}{_since(f.limit_at, now_s, step)}" for f in table.functions.values() if f.limit]
    return f"hit the recompile limit, running uncompiled (eager) since: {', '.join(hit)}" if hit else ""


def _since(at: tuple[float, int] | None, now_s: float | None, step: int | None) -> str:
    """ " (step 40: 95 s and 760 steps ago)" — how long a function has run uncompiled ("" unknown)."""
    if at is None or now_s is None:
        return ""
    when, at_step = at
    steps = f" and {step - at_step} steps" if step is not None and at_step and step >= at_step else ""
    where = f"step {at_step}: " if at_step else ""
    return f" ({where}{max(0.0, now_s - when):.0f} s{steps} ago)"


def compile_figures(table: CompileTable | None, training_s: float, steps: int) -> dict[str, str]:
    """What the compile-bound rule weighed (a diagnosis event's details; none for a job that compiles nothing)."""
    if not table:
        return {}
    again = table.in_training()
    return {
        "compile_recompiles": str(len(again)),
        "compile_lost_s": f"{sum(r.seconds for r in again):.3f}",
        "compile_training_s": f"{training_s:.3f}",
        "compile_steps": str(steps),
        "compile_last_step": str(again[-1].step if again else 0),
    }
