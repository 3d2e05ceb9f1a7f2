"""Model FLOPs utilisation in the workload process: each configuration's step counted once, eagerly
(``gpudash.boot.gpudash_boot.flop_count`` on the workload's ``probe_step``), the GPU's dense peak for the step's
dtype chosen (``gpudash.core.peaks``), and both turned into every sample's TFLOP/s and MFU.

A configuration's count is kept by what changes a step's arithmetic — family, variant, batch size
and the precision knobs (``amp``, ``tf32``) — so going back to a configuration counts nothing
again, and the compile and CUDA-graph knobs reuse the eager count (they change how the arithmetic
is launched, not how much of it there is). Each count goes out once as a "measured" event
(``what="flops"``) saying what was counted, or why MFU is blank. Torch is imported only inside
functions (the loop's torch is given).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from gpudash.boot.gpudash_boot.flop_count import StepFlops, count_step_flops
from gpudash.core.flops_note import FlopsNote
from gpudash.core.peaks import PRECISION_KNOBS, PeakChoice, choose_peak, model_rates
from gpudash.core.protocol import FLOPS, Event, EventKind, Sample
from gpudash.engine.events import one_line

if TYPE_CHECKING:  # pragma: no cover
    from workloads.base import Workload


@dataclass(frozen=True)
class ModelCount:
    """One configuration's count: its FLOPs a step (None: not known) and the peak they are a share of."""

    flops_per_step: float | None
    dtype: str | None
    peak: PeakChoice
    message: str
    blank: str = ""  # why MFU is blank ("": it is not)

    def note(self, **cost: Any) -> FlopsNote:
        """The "flops" event's data (``cost``: what counting cost a job, ``FlopsNote``'s fields)."""
        mixed = self.flops_per_step is not None and self.dtype is None
        flops = int(self.flops_per_step) if self.flops_per_step is not None else None  # exact: a count
        dtype = self.dtype or ("mixed" if mixed else "")
        return FlopsNote(flops, dtype, self.peak.tflops, self.peak.source, self.blank, **cost)

    def rates(self, steps_per_s: float) -> tuple[float | None, float | None, float | None]:
        """(FLOPs a step, TFLOP/s, MFU %) of a sample at ``steps_per_s``; Nones where not known."""
        tflops, mfu = model_rates(self.flops_per_step, steps_per_s, self.peak)
        return self.flops_per_step, tflops, mfu


def with_model_rates(sample: Sample, count: ModelCount | None) -> Sample:
    """``sample`` with its FLOPs a step, TFLOP/s and MFU % at its own step rate (left blank where
    nothing was counted)."""
    if count is None:
        return sample
    flops, tflops, mfu = count.rates(sample.steps_per_s)
    return replace(sample, flops_per_step=flops, tflops=tflops, mfu_pct=mfu)


def flop_text(flops: float) -> str:
    """``3.1 TFLOP``, ``231 MFLOP``: a count of FLOPs with its prefix, three significant digits."""
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if flops >= scale:
            return f"{flops / scale:.3g} {prefix}FLOP"
    return f"{flops:.3g} FLOP"


def describe(counted: StepFlops | None, why_not: str | None, peak: PeakChoice) -> tuple[str, str]:
    """The event's line: what was counted and against what, or why MFU is blank; and that why ("":
    MFU is not blank)."""
    if counted is None or not counted.known:
        why = why_not or "torch counted no FLOPs in the step"
        return f"MFU blank: {why}", why
    what = f"model FLOPs: {flop_text(counted.total)} a step ({counted.dtypes_text()})"
    if peak.tflops is None:
        return f"{what}; MFU blank: {peak.source}", peak.source
    return f"{what}; MFU over {peak.tflops:g} TFLOP/s ({peak.source})", ""


class ModelFlops:
    """The loop's model-FLOPs state: counts by configuration, the one running, the peak's inputs."""

    def __init__(self, torch: Any, device: Any, peak_override: float | None) -> None:
        self.torch = torch
        on_cuda = device.type == "cuda"
        self.device_name: str | None = torch.cuda.get_device_name(device) if on_cuda else None
        self.peak_override = peak_override
        self.counts: dict[tuple[object, ...], ModelCount] = {}
        self.current: ModelCount | None = None

    def key(self, w: Workload) -> tuple[object, ...]:
        """What a configuration's count is kept by."""
        return (w.info.name, w.variant, w.batch_size, *(w.knobs.value(k) for k in PRECISION_KNOBS))

    def refresh(self, w: Workload, emit: Any, time_s: float) -> None:
        """The running configuration's count (made now if new, and said in an event)."""
        key = self.key(w)
        known = self.counts.get(key)
        if known is None:
            known = self.counts[key] = self._count(w)
            emit(Event(time_s, EventKind.MEASURED, what=FLOPS, message=known.message, data=known.note()))
        self.current = known

    def _count(self, w: Workload) -> ModelCount:
        counted: StepFlops | None = None
        why_not: str | None = None
        try:
            with w.probe_step() as step:
                counted = count_step_flops(step, self.torch)
        except Exception as exc:  # noqa: BLE001 - a count that fails leaves MFU blank, never the run
            why_not = f"could not count the step's FLOPs ({one_line(exc)})"
        dtype = counted.dtype if counted is not None else None
        peak = choose_peak(self.device_name, dtype, self.peak_override)
        flops = float(counted.total) if counted is not None and counted.known else None
        return ModelCount(flops, dtype, peak, *describe(counted, why_not, peak))
