"""The model FLOPs of one training step, counted once on an eager step with torch's own FLOP
formulas (``torch.utils.flop_counter.flop_registry``: matmuls, convolutions, attention, forward and
backward — what ``FlopCounterMode`` counts), before any compile or graph capture — the numerator of
model FLOPs utilisation — and the dtype that arithmetic ran in (the denominator's row of the peaks
table, ``gpudash.core.peaks``).

Torch-free at import (the step's ``torch`` is given), and standard library only: a job's hooks count
with it (``step_flops.py``), and so does gpudash's own engine (``gpudash/engine/model_flops.py``). A
step whose FLOPs torch cannot count (a compiled-only region, custom kernels) counts what it can; a
count of zero says the step's FLOPs are not known, never that it made none.

The dtype: each counted operator's FLOPs go to the dtype of its first tensor argument — ``bf16``
and ``fp16`` (autocast's matmuls included: autocast casts before the operator runs), ``tf32``
for fp32 on a GPU where torch lets that operator use TF32 (``torch.backends.cuda.matmul.allow_tf32``
for matmuls, ``torch.backends.cudnn.allow_tf32`` for convolutions), ``fp32`` otherwise; anything
else by its torch name. A step is of one dtype when ``DOMINANT`` of its FLOPs are.

The count is one dispatch mode of gpudash's own, not ``FlopCounterMode``: that one also installs
global module hooks (its module tracker, which raised inside activation checkpointing's recompute
in torch 2.4.0) and, from torch 2.4 on, a second mode under a private attribute. ``FlopCount``
starts and stops a count apart (a job's hooks count from the end of one of its steps to the end
of the next); a count that cannot be taken off its thread's stack (the job stepped on another
thread, or entered a mode of its own over it) is switched to passing every operator straight
through until it can, and one given a ``deadline`` counts no more past it (``overran``: a job's
hooks give up a count that costs its step too much). ``count_step_flops`` runs one given step under
it. An exception of an operator leaves the mode without its frame (a job's Ctrl-C reads as bare).
A FLOP formula that fails never raises into the counted work: the count notes it.

Private APIs of torch, kept here (``tests/test_private_apis.py``): ``TorchDispatchMode`` and the
thread's stack of dispatch modes (``torch.utils._python_dispatch``: the count, and whether it is
still on top when it stops), and an operator's ``_overloadpacket`` (the key of torch's FLOP
registry, as ``FlopCounterMode`` itself uses it). Torch has no public equivalent of any of them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

DOMINANT = 0.95  # of a step's FLOPs in one dtype: the step is of that dtype (else mixed)
MAX_ERRORS = 5  # failures to count kept, of a count
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
    if dtype == torch.bfloat16:
        return "bf16"
    if dtype == torch.float16:
        return "fp16"
    if dtype == torch.float32:
        if on_cuda:
            conv = any(op.startswith(f"aten.{c}") for c in _CONVOLUTIONS)
            allowed = torch.backends.cudnn.allow_tf32 if conv else torch.backends.cuda.matmul.allow_tf32
            if allowed:
                return "tf32"
        return "fp32"
    return str(dtype).removeprefix("torch.")


def _counting_mode(torch: Any, count: FlopCount) -> Any:
    """A dispatch mode that adds each operator's FLOPs (torch's registry formulas) to ``count``'s
    tallies by dtype class and by operator; a failure to count is noted, never raised; once
    ``count.passing`` is set (or its ``deadline`` passed: ``overran``) it only runs the operators. An
    exception of the operator's leaves it as it would without the mode: no frame of the mode's."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.flop_counter import flop_registry

    class Counting(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            try:
                out = func(*args, **kwargs)
            except BaseException as exc:
                _unwound(exc, Counting.__torch_dispatch__.__code__)
                raise
            if count.passing:
                return out
            if count.deadline is not None and time.monotonic() > count.deadline:
                count.passing = count.overran = True
                return out
            try:
                packet = func._overloadpacket
                formula = flop_registry.get(packet)
                first = next((a for a in args if isinstance(a, torch.Tensor)), None)
                if formula is not None and first is not None:
                    flops = int(formula(*args, **kwargs, out_val=out))
                    key = dtype_class(first.dtype, str(packet), first.is_cuda, torch)
                    count.by_dtype[key] = count.by_dtype.get(key, 0) + flops
                    count.by_op[str(packet)] = count.by_op.get(str(packet), 0) + flops
            except Exception as exc:  # noqa: BLE001 - the step goes on; the count says it failed
                if len(count.errors) < MAX_ERRORS:
                    count.errors.append(f"{type(exc).__name__}: {exc}")
            return out

    return Counting()


def _unwound(exc: BaseException, own: Any) -> None:
    """``exc``'s traceback without the counting mode's frame (its head, ``own``'s) and the operator
    call's under it (torch's ``OpOverload.__call__``): without the mode the operator is called with
    neither. A bare ``raise`` after this re-raises it so (Python 3.11 and later)."""
    tb = exc.__traceback__
    if tb is None or tb.tb_frame.f_code is not own:
        return
    tb = tb.tb_next
    if (
        tb is not None
        and tb.tb_frame.f_code.co_name == "__call__"
        and tb.tb_frame.f_code.co_filename.endswith("_ops.py")
    ):
        tb = tb.tb_next
    exc.__traceback__ = tb


class FlopCount:
    """A count started and stopped apart, on one thread: the counting mode entered by ``start()``
    and left by ``stop()`` (a job's hooks: at the end of one of its steps, then of the next). A
    FLOP formula that fails inside the counted work never raises into it: it counts nothing and is
    noted in ``errors`` (the count is then not to be trusted). ``pass_through()``: the mode stays
    on the stack (it cannot be left from here) but only runs the operators."""

    def __init__(self, torch: Any) -> None:
        self.torch = torch
        self.by_dtype: dict[str, int] = {}
        self.by_op: dict[str, int] = {}
        self.errors: list[str] = []
        self.passing = False
        self.deadline: float | None = None  # (monotonic) past it the count counts no more: ``overran``
        self.overran = False
        self.mode: Any = None  # the counting mode, while the count runs

    def start(self) -> None:
        """Enter the counting mode (on this thread's stack of dispatch modes)."""
        mode = _counting_mode(self.torch, self)
        mode.__enter__()
        self.mode = mode

    def on_top(self) -> bool:
        """The counting mode is the top of this thread's stack (nothing entered since, or left)."""
        from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

        stack = _get_current_dispatch_mode_stack()
        return self.mode is not None and bool(stack) and stack[-1] is self.mode

    def pass_through(self) -> None:
        """Count no more: the mode, if it must stay on the stack for now, only runs the operators."""
        self.passing = True

    def stop(self) -> StepFlops:
        """Leave the counting mode; what it counted."""
        mode = self.mode
        if mode is None:
            raise RuntimeError("the FLOP count is not running")
        self.mode = None
        self.passing = True
        mode.__exit__(None, None, None)
        by_op = tuple(sorted(((k, n) for k, n in self.by_op.items() if n > 0), key=lambda kv: -kv[1]))
        by_dtype = tuple(sorted(((k, n) for k, n in self.by_dtype.items() if n > 0), key=lambda kv: -kv[1]))
        return StepFlops(total=sum(n for _, n in by_dtype), by_op=by_op, by_dtype=by_dtype)


def count_step_flops(step: Callable[[], Any], torch: Any) -> StepFlops:
    """Run ``step()`` once under the counting mode and return what it counted, and in what dtype
    (a FLOP formula that failed: ``RuntimeError``, after the step)."""
    count = FlopCount(torch)
    count.start()
    try:
        step()
    finally:
        counted = count.stop()
    if count.errors:
        raise RuntimeError(f"torch could not count an operator's FLOPs: {count.errors[0]}")
    return counted
