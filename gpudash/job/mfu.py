"""A job's model FLOPs utilisation on gpudash's side: the count a rank's hooks sent
(``gpudash/job/boot/gpudash_job_flops.py``: the FLOPs of one optimizer step and their shares by
dtype, or why there is none), the GPU's dense peak it is a share of (``gpudash.core.peaks``), each
sample's TFLOP/s and MFU, and the one "flops" event, worded and keyed as the families' are
(``gpudash.engine.model_flops``). Per GPU: a rank's FLOPs at the job's steps per second (every
rank steps together). Torch-free.
"""

from __future__ import annotations

from typing import Any

from gpudash.core.peaks import PeakChoice, choose_peak
from gpudash.engine.flops import StepFlops
from gpudash.engine.model_flops import ModelCount, describe


def job_count(message: dict[str, Any], peak_override: float | None) -> ModelCount:
    """The count in a rank's "flops" message, and the peak ``choose_peak`` gives for its dtype."""
    why = str(message.get("why") or "")
    try:
        by_dtype = tuple((str(name), int(n)) for name, n in message.get("by_dtype") or ())
        counted = None if why else StepFlops(total=int(message["flops"]), by_op=(), by_dtype=by_dtype)
    except (KeyError, TypeError, ValueError):
        counted, why = None, why or "the job's hooks sent a count gpudash cannot read"
    if counted is None:
        return not_counted(f"the step's FLOPs were not counted: {why}")
    if not counted.known:
        return not_counted("torch counted no FLOPs in the step")
    device_name = message.get("device_name")
    peak = choose_peak(str(device_name) if device_name else None, counted.dtype, peak_override)
    return ModelCount(float(counted.total), counted.dtype, peak, describe(counted, None, peak))


def not_counted(why: str) -> ModelCount:
    """No count: MFU blank, and why."""
    return ModelCount(None, None, PeakChoice(None, why), f"MFU blank: {why}")


def missing(steps: int) -> ModelCount:
    """The job ended (or gpudash stopped it) without a count from its lead rank."""
    if steps < 2:
        made = "one optimizer step" if steps == 1 else "no optimizer step"
        return not_counted(f"the job made {made}: the count is of its second")
    return not_counted("the job's hooks sent no count (they went off, or the count was lost)")
