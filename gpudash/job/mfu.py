"""A job's model FLOPs utilisation on gpudash's side: the count a rank's hooks sent
(``gpudash/job/boot/gpudash_job_flops.py``: the FLOPs of one optimizer step and their shares by
dtype, or why there is none), the GPU's dense peak it is a share of (``gpudash.core.peaks``), each
sample's TFLOP/s and MFU, and the one "flops" event, worded and keyed as the families' are
(``gpudash.engine.model_flops``). Per GPU: a rank's FLOPs at the job's steps per second (every
rank steps together). Torch-free.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpudash.core.peaks import PeakChoice, choose_peak, model_rates
from gpudash.engine.flops import StepFlops
from gpudash.engine.model_flops import describe


@dataclass(frozen=True)
class JobCount:
    """What the job's count says: its FLOPs a step (None: not known), the peak, the event's line."""

    flops_per_step: float | None
    peak: PeakChoice
    message: str
    details: dict[str, str] = field(default_factory=dict)

    def rates(self, steps_per_s: float) -> tuple[float | None, float | None, float | None]:
        """(FLOPs a step, TFLOP/s, MFU %) of a sample at ``steps_per_s``; Nones where not known."""
        tflops, mfu = model_rates(self.flops_per_step, steps_per_s, self.peak)
        return self.flops_per_step, tflops, mfu


def job_count(message: dict[str, Any], peak_override: float | None) -> JobCount:
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
    details = {"flops_per_step": str(counted.total), "dtype": counted.dtype or "mixed", "peak_source": peak.source}
    if peak.tflops is not None:
        details["peak_tflops"] = f"{peak.tflops:g}"
    return JobCount(float(counted.total), peak, describe(counted, None, peak), details)


def not_counted(why: str) -> JobCount:
    """No count: MFU blank, and why."""
    return JobCount(None, PeakChoice(None, why), f"MFU blank: {why}", {"dtype": "", "peak_source": why})


def missing(steps: int) -> JobCount:
    """The job ended (or gpudash stopped it) without a count from its lead rank."""
    if steps < 2:
        made = "one optimizer step" if steps == 1 else "no optimizer step"
        return not_counted(f"the job made {made}: the count is of its second")
    return not_counted("the job's hooks sent no count (they went off, or the count was lost)")
