"""A job's model FLOPs utilisation on gpudash's side: the count a rank's hooks sent
(``gpudash/boot/gpudash_boot/step_flops.py``: the FLOPs of one step and their shares by dtype, or why
there is none, and what the count cost the job), the GPU's dense peak it is a share of
(``gpudash.core.peaks``), each sample's TFLOP/s and MFU, and the one "flops" event, worded and keyed
as the families' are (``gpudash.engine.model_flops``). Per GPU: a rank's FLOPs at the job's steps per
second (every rank steps together). Torch-free.
"""

from __future__ import annotations

from typing import Any

from gpudash.boot.gpudash_boot.flop_count import StepFlops
from gpudash.core.peaks import PeakChoice, choose_peak
from gpudash.engine.model_flops import ModelCount, describe

COUNTED_STEP = 4  # the step the hooks count in most jobs: after one timed without gpudash's work, and the memory's


def job_count(message: dict[str, Any], peak_override: float | None) -> ModelCount:
    """The count in a rank's "flops" message, and the peak ``choose_peak`` gives for its dtype."""
    why = str(message.get("why") or "")
    try:
        by_dtype = tuple((str(name), int(n)) for name, n in message.get("by_dtype") or ())
        counted = None if why else StepFlops(total=int(message["flops"]), by_op=(), by_dtype=by_dtype)
    except (KeyError, TypeError, ValueError):
        counted, why = None, why or "the job's hooks sent a count gpudash cannot read"
    if counted is None:
        said = cost_text(message)
        return not_counted(f"the step's FLOPs were not counted: {why}" + (f"; {said}" if said else ""))
    if not counted.known:
        return not_counted("torch counted no FLOPs in the step")
    device_name = message.get("device_name")
    peak = choose_peak(str(device_name) if device_name else None, counted.dtype, peak_override)
    said, blank = describe(counted, None, peak)
    if how := str(message.get("how") or ""):  # a compiled model's: counted apart from its steps
        said += f"; counted as {how}" + (f" ({cost})" if (cost := cost_text(message)) else "")
    return ModelCount(float(counted.total), counted.dtype, peak, said, blank)


def not_counted(why: str) -> ModelCount:
    """No count: MFU blank, and why."""
    return ModelCount(None, None, PeakChoice(None, why), f"MFU blank: {why}", why)


def cost(message: dict[str, Any]) -> dict[str, Any]:
    """What the count cost the job, as the "flops" note's fields: the counted step, its seconds and
    an untraced step's (``FlopsNote``); none where the hooks did not say."""
    step_s, untraced_s = message.get("step_s"), message.get("untraced_s")
    if not isinstance(step_s, (int, float)) or not isinstance(untraced_s, (int, float)) or untraced_s <= 0:
        return {}
    step = message.get("step")
    counted = step if isinstance(step, int) and not isinstance(step, bool) and step > 0 else None
    return {"count_step": counted, "count_step_s": float(step_s), "untraced_s": float(untraced_s)}


def cost_text(message: dict[str, Any]) -> str:
    """ "the count cost the job 0.31 s (its step 4 took 0.52 s against 0.21 s untraced)"; "" unsaid."""
    said = cost(message)
    if not said:
        return ""
    step = f"its step {said['count_step']}" if said["count_step"] else "its step"
    spent = max(0.0, said["count_step_s"] - said["untraced_s"])
    return (
        f"the count cost the job {spent:.2g} s ({step} took "
        f"{said['count_step_s']:.2g} s against {said['untraced_s']:.2g} s untraced)"
    )


def missing(steps: int) -> ModelCount:
    """The job ended (or gpudash stopped it) without a count from its lead rank."""
    if steps < COUNTED_STEP:
        made = "one step" if steps == 1 else f"{steps or 'no'} steps"
        return not_counted(f"the job made {made}: the count is of a later one (its fourth, in most jobs)")
    return not_counted("the job's hooks sent no count (they went off, or the count was lost)")
