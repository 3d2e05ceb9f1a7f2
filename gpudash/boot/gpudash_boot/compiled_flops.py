"""The model FLOPs of a compiled job's step, counted without compiling or running anything again.
Standard library and the job's own torch only (``step_flops.py`` uses it).

Compiled code runs no operator gpudash's counter sees. So each module the job passed to
``torch.compile`` is watched (a forward pre-hook on the compiled wrapper, outside the compiled
region): over the counted step, its training forward calls (grad on, train mode) are kept with
what autocast was doing. At the step's end each distinct call (its module, its tensors' shapes and
dtypes, autocast) is run once on the module's uncompiled original (``_orig_mod``): forward, then
backward from the sum of its outputs, on fake tensors (``FakeTensorMode``: no memory, no kernel),
under gpudash's count (``flop_count.FlopCount``: torch's FLOP formulas, by dtype). The step's
FLOPs are the sum over its calls. A shape seen before is not counted again.

The same hook tells where a step ran at a new shape (``stepped``): one of the first
``NEW_SHAPE_CALLS`` training forwards of a compiled module at its tensors' shapes — a recompile, new
kernels, a CUDA graph recorded again (a module compiled to run as CUDA graphs, ``mode="reduce-overhead"``, records its
graphs again at each). gpudash keeps such steps out of the steady rate and says what they cost.

The count is bounded as the eager one is (its ``deadline``); it is gpudash's own time between two
steps (the hooks mark it so), and a failure (a forward that reads a value off a tensor cannot run
on fake tensors) says why MFU is blank. Modules compiled one by one that leave part of the model
eager (under ``COVERED`` of the parameters the optimizer steps) are not counted here: the step after
is counted eagerly instead, its compiled code run uncompiled for that one step (``step_flops.py``).

What the job compiles, and what runs uncompiled for the count:

- a module (``torch.compile(model)``): the wrapper's ``_orig_mod``, watched by a forward pre-hook;
- a module compiled in place (``model.compile()``) or a module's bound method
  (``torch.compile(model.forward)``): the job gets back a wrapper of the compiled function that
  notes each call, then calls it; the count calls the uncompiled method;
- a plain function: not counted, and the reason says so.

Private API of torch, kept here (``tests/test_private_apis.py``): ``FakeTensorMode``
(``torch._subclasses.fake_tensor``), as ``FlopCounterMode``'s own documentation uses it;
``torch.nn.utils.stateless._reparametrize_module``, the context ``torch.func.functional_call``
runs a module's call in, here around a bound method's call (``functional_call`` can only call the
module, whose call would run the compiled code again).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .flop_count import FlopCount, StepFlops

HOW = "the uncompiled model's forward and backward on fake tensors of the step's shapes"
# the training calls at a new shape that pay for it: the first compiles and loads its kernels, the
# second records its CUDA graphs (torch's CUDA-graph trees run a shape once before they record it)
NEW_SHAPE_CALLS = 2
MAX_CALLS = 64  # training forward calls kept over one step (micro-batches); past it the count gives up
COVERED = 0.99  # the compiled modules hold at least this share of the stepped parameters: the model counted


@dataclass(frozen=True, eq=False)
class Watched:
    """One compile of the job's that is counted: the module whose parameters the count fakes, and the
    uncompiled callable the count runs (the module itself, or one of its bound methods)."""

    module: Any
    run: Any
    graphed: bool  # compiled to run as CUDA graphs


class CompiledForwards:
    """The job's compiled modules, and their training forward calls over the step being counted."""

    def __init__(self, torch: Any) -> None:
        self.torch = torch
        self.watched = 0  # how many of the job's compiles are watched
        self.unwatched = ""  # why a compile of the job's cannot be counted ("": none such)
        self.recording = False
        self.calls: list[tuple[Watched, tuple[Any, ...], dict[str, Any], tuple[str, bool, Any]]] = []
        self.cache: dict[tuple[Any, ...], Any] = {}  # a call's signature -> its StepFlops
        self.shapes: dict[tuple[Any, ...], int] = {}  # each (compile, signature) a training forward ran at: how often
        self.new_shape = 0  # the step under way: 1 a training forward at a shape not seen before, 2 with CUDA graphs
        self.part = ""  # the compiled modules hold part of the model only: what they hold (the step is counted eagerly)

    def watch(self, compiled: Any, target: Any, options: dict[str, Any] | None = None) -> Any:
        """``torch.compile(target, **options)`` returned ``compiled``: a module's compiled wrapper is
        watched by a pre-hook (None: the job keeps ``compiled``); a compiled bound method of a module
        (``Module.compile`` compiles its ``_call_impl``) is given back wrapped, its calls noted."""
        module, graphed = self.torch.nn.Module, uses_cuda_graphs(options or {})
        original = getattr(compiled, "_orig_mod", None)
        if isinstance(compiled, module) and isinstance(original, module):
            inner = _unwrapped(self.torch, original)
            watched = Watched(inner, inner, graphed)
            compiled.register_forward_pre_hook(functools.partial(self._hooked, watched), with_kwargs=True)
            self.watched += 1
            return None
        owner = getattr(target, "__self__", None)
        if isinstance(owner, module) and callable(compiled):
            watched = Watched(owner, target, graphed)
            self.watched += 1

            def noted(*args: Any, **kwargs: Any) -> Any:
                self._called(watched, args, kwargs)
                return compiled(*args, **kwargs)

            return functools.update_wrapper(noted, compiled)
        self.unwatched = f"the job compiled a function ({getattr(target, '__name__', 'unnamed')}), not a module"
        return None

    def _hooked(self, watched: Watched, _wrapper: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self._called(watched, args, kwargs)

    def _called(self, watched: Watched, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        torch = self.torch
        if not watched.module.training or not torch.is_grad_enabled():
            return
        shape = (id(watched), _signature(args, kwargs))
        self.shapes[shape] = seen = self.shapes.get(shape, 0) + 1
        if seen <= NEW_SHAPE_CALLS:  # a new shape: a recompile, new kernels, its CUDA graphs recorded again
            self.new_shape = max(self.new_shape, 2 if watched.graphed else 1)
        if self.recording and len(self.calls) <= MAX_CALLS:
            device = next((t.device.type for t in _tensors(args, kwargs)), "cpu")
            autocast = (device, torch.is_autocast_enabled(device), torch.get_autocast_dtype(device))
            self.calls.append((watched, args, dict(kwargs), autocast))

    def stepped(self) -> int:
        """At a step's end: whether a compiled module's training forward ran at a new shape in it (1),
        recording its CUDA graphs again (2), or not (0)."""
        new, self.new_shape = self.new_shape, 0
        return new

    def count(self, deadline: float | None, optimizer: Any = None) -> tuple[StepFlops | None, str]:
        """The FLOPs of the calls kept, or None and why; the calls are let go. Where the compiled
        modules called hold less than all the parameters ``optimizer`` steps, the rest of the model
        ran eager, uncounted here: no count, and ``part`` says so (the next step is counted eagerly)."""
        calls, self.calls, self.recording = self.calls, [], False
        if not calls:
            return None, self.unwatched or "no compiled module's training forward ran in the counted step"
        if len(calls) > MAX_CALLS:
            return None, f"over {MAX_CALLS} compiled forward calls in the counted step"
        share = _compiled_share({id(w.module): w.module for w, *_ in calls}.values(), optimizer)
        if share < COVERED:
            held = f"{100 * share:.0f}% of the parameters its optimizer steps"
            self.part = f"the job compiled part of its model (the compiled modules hold {held})"
            return None, self.part
        total: dict[str, int] = {}
        for watched, args, kwargs, autocast in calls:
            key = (id(watched), _signature(args, kwargs), autocast)
            if key not in self.cache:
                try:
                    self.cache[key] = self._fake_step(watched, args, kwargs, autocast, deadline)
                except Exception as exc:  # noqa: BLE001 - a forward fake tensors cannot run: no count, and why
                    return None, f"the count on fake tensors failed: {type(exc).__name__}: {exc}"
            for dtype, n in self.cache[key].by_dtype:
                total[dtype] = total.get(dtype, 0) + n
        by_dtype = tuple(sorted(total.items(), key=lambda kv: -kv[1]))
        return StepFlops(total=sum(total.values()), by_op=(), by_dtype=by_dtype), ""

    def _fake_step(self, watched: Watched, args: Any, kwargs: Any, autocast: Any, deadline: float | None) -> Any:
        torch = self.torch
        from torch._subclasses.fake_tensor import FakeTensorMode
        from torch.nn.utils.stateless import _reparametrize_module

        model = watched.module
        with FakeTensorMode(allow_non_fake_inputs=True) as mode:
            fake = _mapped(lambda t: mode.from_tensor(t), (args, kwargs))
            state = {n: mode.from_tensor(p).requires_grad_(p.requires_grad) for n, p in model.named_parameters()}
            state |= {n: mode.from_tensor(b) for n, b in model.named_buffers()}
            counter = FlopCount(torch)
            counter.deadline = deadline
            counter.start()
            try:
                device, enabled, dtype = autocast
                with torch.autocast(device, dtype=dtype, enabled=enabled), _reparametrize_module(model, state, True):
                    out = watched.run(*fake[0], **fake[1])
                leaves = [t for t in _tensors(out) if t.requires_grad and t.is_floating_point()]
                wrt = [t for t in state.values() if t.requires_grad]
                if leaves and wrt:
                    loss = sum(t.float().sum() for t in leaves)
                    torch.autograd.grad(loss, wrt, allow_unused=True)
            finally:
                counted = counter.stop()
        if counter.overran:
            raise TimeoutError("the count of the compiled model's FLOPs ran past its time")
        if counter.errors:
            raise RuntimeError(f"torch could not count an operator's FLOPs ({counter.errors[0]})")
        return counted


def _compiled_share(modules: Any, optimizer: Any) -> float:
    """The share of the elements of the parameters ``optimizer`` steps (trainable ones) that the
    compiled ``modules`` hold (1.0 where no optimizer is known: a hand update)."""
    groups = getattr(optimizer, "param_groups", None)  # (a hand update's leaves: no optimizer)
    if not isinstance(groups, list):
        return 1.0
    stepped = {id(p): p.numel() for g in groups for p in g.get("params", ()) if p.requires_grad}
    held = {id(p) for m in modules for p in m.parameters()}
    total = sum(stepped.values())
    return sum(n for i, n in stepped.items() if i in held) / total if total else 1.0


def _unwrapped(torch: Any, module: Any) -> Any:
    """The model inside a data-parallel wrapper compiled whole (``torch.compile(DDP(model))``): its
    forward, run on fake tensors, would broadcast buffers and prepare a reduction that never comes."""
    parallel = torch.nn.parallel.DistributedDataParallel
    return module.module if isinstance(module, parallel) else module


def uses_cuda_graphs(options: dict[str, Any]) -> bool:
    """``torch.compile``'s keyword arguments run the compiled code as CUDA graphs: mode
    "reduce-overhead" or "max-autotune", or inductor's ``triton.cudagraphs`` option."""
    extra = options.get("options")
    return options.get("mode") in ("reduce-overhead", "max-autotune") or (
        isinstance(extra, dict) and bool(extra.get("triton.cudagraphs"))
    )


def _tensors(*values: Any) -> list[Any]:
    """The tensors in ``values`` (nested tuples, lists and dicts: a model's inputs and outputs)."""
    found: list[Any] = []
    _mapped(lambda t: _kept(found, t), values)
    return found


def _kept(into: list[Any], value: Any) -> Any:
    into.append(value)
    return value


def _mapped(fn: Callable[[Any], Any], value: Any) -> Any:
    """``value`` with each tensor in it replaced by ``fn(tensor)`` (a tuple's or a dict's subclass,
    such as a named tuple or a model output, is read as a plain one)."""
    if hasattr(value, "is_floating_point") and hasattr(value, "shape"):
        return fn(value)
    if isinstance(value, tuple):
        return tuple(_mapped(fn, v) for v in value)
    if isinstance(value, list):
        return [_mapped(fn, v) for v in value]
    if isinstance(value, dict):
        return {k: _mapped(fn, v) for k, v in value.items()}
    return value


def _signature(args: Any, kwargs: Any) -> tuple[Any, ...]:
    """A call's tensors' shapes and dtypes: what its count depends on."""
    return tuple((tuple(t.shape), str(t.dtype), t.requires_grad) for t in _tensors(args, kwargs))
