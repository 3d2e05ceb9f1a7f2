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

``FlopCount`` starts and stops a count apart (a job's hooks count from the end of one optimizer
step to the end of the next); ``count_step_flops`` runs one given step under it. A FLOP formula
that fails never raises into the counted work: the count notes it.

Private APIs of torch, kept here (``tests/test_private_apis.py``): ``TorchDispatchMode`` and the
thread's stack of dispatch modes (``torch.utils._python_dispatch``: the dtype tally, and whether a
count's modes are still on top when it stops), an operator's ``_overloadpacket`` (the key of
torch's FLOP registry, as ``FlopCounterMode`` itself uses it) and ``FlopCounterMode``'s
``_get_raw`` flag on a formula (the guarded formulas are called as given). Torch has no public
equivalent of any of them.
"""

from __future__ import annotations

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


def _guarded(formula: Callable[..., Any], errors: list[str]) -> Callable[..., Any]:
    """``formula`` (a FLOP formula of torch's registry) that never raises into the counted step:
    a failure is noted in ``errors`` and counts nothing."""

    def guarded(*args: Any, **kwargs: Any) -> Any:
        try:
            return formula(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - the step goes on; the count says it failed
            if len(errors) < MAX_ERRORS:
                errors.append(f"{type(exc).__name__}: {exc}")
            return 0

    guarded._get_raw = True  # type: ignore[attr-defined]  # FlopCounterMode: call it as given (wrapped already)
    return guarded


def _tally_mode(torch: Any, tally: dict[str, int], registry: dict[Any, Any], errors: list[str]) -> Any:
    """A dispatch mode that adds each counted operator's FLOPs (``registry``'s formulas) to
    ``tally`` by its dtype class; a failure to count is noted in ``errors``, never raised."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class DtypeTally(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            try:
                packet = func._overloadpacket
                count = registry.get(packet)
                first = next((a for a in args if isinstance(a, torch.Tensor)), None)
                if count is not None and first is not None:
                    flops = int(count(*args, **kwargs, out_val=out))
                    key = dtype_class(first.dtype, str(packet), first.is_cuda, torch)
                    tally[key] = tally.get(key, 0) + flops
            except Exception as exc:  # noqa: BLE001 - the step goes on; the count says it failed
                if len(errors) < MAX_ERRORS:
                    errors.append(f"{type(exc).__name__}: {exc}")
            return out

    return DtypeTally()


class FlopCount:
    """A count started and stopped apart, on one thread: ``FlopCounterMode`` and the dtype tally
    entered by ``start()`` and left by ``stop()`` (a job's hooks: at the end of one optimizer step,
    then of the next). A FLOP formula that fails inside the counted work never raises into it: it
    counts nothing and is noted in ``errors`` (the count is then not to be trusted)."""

    def __init__(self, torch: Any) -> None:
        self.torch = torch
        self.tally: dict[str, int] = {}
        self.errors: list[str] = []
        self.counter: Any = None  # the FlopCounterMode, while the count runs
        self.mode: Any = None  # the dtype tally, on top of it

    @property
    def running(self) -> bool:
        return self.counter is not None

    def start(self) -> None:
        """Enter the counter and the tally (on this thread's stack of dispatch modes)."""
        from torch.utils.flop_counter import FlopCounterMode, flop_registry

        registry = {op: _guarded(formula, self.errors) for op, formula in flop_registry.items()}
        counter = FlopCounterMode(display=False, custom_mapping=registry)
        mode = _tally_mode(self.torch, self.tally, registry, self.errors)
        counter.__enter__()
        try:
            mode.__enter__()
        except BaseException:
            counter.__exit__(None, None, None)
            raise
        self.counter, self.mode = counter, mode

    def on_top(self) -> bool:
        """The count's two modes are the top of this thread's stack (nothing entered since, or left)."""
        from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

        stack = _get_current_dispatch_mode_stack()
        return (
            self.counter is not None
            and len(stack) >= 2
            and stack[-1] is self.mode
            and stack[-2] is getattr(self.counter, "mode", None)
        )

    def stop(self) -> StepFlops:
        """Leave the tally and the counter (both, whatever happens); what they counted."""
        counter, mode = self.counter, self.mode
        if counter is None:
            raise RuntimeError("the FLOP count is not running")
        self.counter = self.mode = None
        try:
            mode.__exit__(None, None, None)
        finally:
            counter.__exit__(None, None, None)
        per_op: dict[str, int] = {}
        for ops in counter.get_flop_counts().values():  # by module; "Global" holds every op once
            for op, n in ops.items():
                per_op[str(op)] = max(per_op.get(str(op), 0), int(n))
        by_op = tuple(sorted(per_op.items(), key=lambda kv: -kv[1]))
        by_dtype = tuple(sorted(((k, n) for k, n in self.tally.items() if n > 0), key=lambda kv: -kv[1]))
        return StepFlops(total=int(counter.get_total_flops()), by_op=by_op, by_dtype=by_dtype)


def count_step_flops(step: Callable[[], Any], torch: Any) -> StepFlops:
    """Run ``step()`` once under ``FlopCounterMode`` and return what it counted, and in what dtype
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
