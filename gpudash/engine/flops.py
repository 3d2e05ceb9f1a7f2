"""The model FLOPs of one training step, counted once on an eager step with torch's own
``torch.utils.flop_counter.FlopCounterMode`` (matmuls, convolutions, attention: forward and
backward), before any compile or graph capture — the numerator of model FLOPs utilisation — and
the dtype that arithmetic ran in (the denominator's row of the peaks table, ``gpudash.core.peaks``).

Torch-free at import (the step's ``torch`` is given), and free of gpudash imports: a job's hooks
load this file by its path (``gpudash/job/boot``). A step whose FLOPs torch cannot count (a
compiled-only region, custom kernels) counts what it can; a count of zero says the step's FLOPs are
not known, never that it made none.

The dtype: each counted operator's FLOPs go to the dtype of its first tensor argument — ``bf16``
for bf16 and fp16 (autocast's matmuls included: autocast casts before the operator runs), ``tf32``
for fp32 on a GPU where torch lets that operator use TF32 (``torch.backends.cuda.matmul.allow_tf32``
for matmuls, ``torch.backends.cudnn.allow_tf32`` for convolutions), ``fp32`` otherwise; anything
else by its torch name. A step is of one dtype when ``DOMINANT`` of its FLOPs are.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

DOMINANT = 0.95  # of a step's FLOPs in one dtype: the step is of that dtype (else mixed)
_CONVOLUTIONS = ("convolution", "convolution_backward", "cudnn_convolution")


@dataclass(frozen=True)
class StepFlops:
    """One eager step's counted FLOPs: the total, by operator (the largest first) and by dtype."""

    total: int
    by_op: tuple[tuple[str, int], ...]
    by_dtype: tuple[tuple[str, int], ...] = ()

    @property
    def known(self) -> bool:
        return self.total > 0

    @property
    def dtype(self) -> str | None:
        """The dtype of at least ``DOMINANT`` of the FLOPs (None: mixed, or nothing counted)."""
        counted = sum(n for _, n in self.by_dtype)
        for name, n in self.by_dtype:
            if counted and n >= DOMINANT * counted:
                return name
        return None

    def dtypes_text(self) -> str:
        """``bf16 97%, fp32 3%``: the FLOPs' shares by dtype."""
        counted = sum(n for _, n in self.by_dtype) or 1
        return ", ".join(f"{name} {100 * n / counted:.0f}%" for name, n in self.by_dtype)


def dtype_class(dtype: Any, op: str, on_cuda: bool, torch: Any) -> str:
    """The peaks table's row for an operator ``op`` computing in ``dtype`` (see the module's text)."""
    if dtype in (torch.bfloat16, torch.float16):
        return "bf16"
    if dtype == torch.float32:
        if on_cuda:
            conv = any(op.startswith(f"aten.{c}") for c in _CONVOLUTIONS)
            allowed = torch.backends.cudnn.allow_tf32 if conv else torch.backends.cuda.matmul.allow_tf32
            if allowed:
                return "tf32"
        return "fp32"
    return str(dtype).removeprefix("torch.")


def _tally_mode(torch: Any, tally: dict[str, int]) -> Any:
    """A dispatch mode that adds each counted operator's FLOPs to ``tally`` by its dtype class."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.flop_counter import flop_registry

    class DtypeTally(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            packet = func._overloadpacket
            count = flop_registry.get(packet)
            if count is not None:
                first = next((a for a in args if isinstance(a, torch.Tensor)), None)
                if first is not None:
                    flops = int(count(*args, **kwargs, out_val=out))
                    key = dtype_class(first.dtype, str(packet), first.is_cuda, torch)
                    tally[key] = tally.get(key, 0) + flops
            return out

    return DtypeTally()


def count_step_flops(step: Callable[[], Any], torch: Any) -> StepFlops:
    """Run ``step()`` once under ``FlopCounterMode`` and return what it counted, and in what dtype."""
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    tally: dict[str, int] = {}
    with counter, _tally_mode(torch, tally):
        step()
    per_op: dict[str, int] = {}
    for ops in counter.get_flop_counts().values():  # by module; "Global" holds every op once
        for op, n in ops.items():
            per_op[str(op)] = max(per_op.get(str(op), 0), int(n))
    by_op = tuple(sorted(per_op.items(), key=lambda kv: -kv[1]))
    by_dtype = tuple(sorted(((k, n) for k, n in tally.items() if n > 0), key=lambda kv: -kv[1]))
    return StepFlops(total=int(counter.get_total_flops()), by_op=by_op, by_dtype=by_dtype)
