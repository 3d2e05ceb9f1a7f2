"""How knobs are applied (``workloads.knobs`` says which exist and where): torch, workload side.

- ``amp``: ``autocast()`` around forward and loss (never around backward or the optimizer).
- ``channels_last``: the models' 4-D weights (``apply_to_modules``) and every 4-D batch tensor
  as it reaches the device (``to_device``).
- ``cudnn_benchmark``, ``tf32``: the process-wide backend flags (``apply_backend_flags``).
- ``compile``: ``torch.compile`` of each model module, cached per module and mode.
- ``cuda_graph``: each stage of the step captured once (``GraphedStage``) and replayed.

Slow first steps (compile, capture, autotuning) happen in ``Workload.warm_up`` under a
``restore_point``: the training state is put back afterwards, so a knob changes how a step
runs, never what it computes beyond the arithmetic's own rounding.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch

from workloads.catalog_types import WorkloadError
from workloads.knobs import OFF, ON, TF32_NEVER, Knobs
from workloads.torch_adapter import compile_options

# PyTorch's own defaults, restored when a knob is turned off.
_DEFAULT_CUDNN_BENCHMARK = torch.backends.cudnn.benchmark
_DEFAULT_MATMUL_TF32 = torch.backends.cuda.matmul.allow_tf32
_DEFAULT_CUDNN_TF32 = torch.backends.cudnn.allow_tf32
GRAPH_WARMUP_CALLS = 3  # eager calls on a side stream before capture (PyTorch's recipe)


def apply_backend_flags(knobs: Knobs) -> None:
    """Set the process-wide cuDNN / TF32 flags for ``knobs`` (PyTorch's defaults when off)."""
    torch.backends.cudnn.benchmark = knobs.on("cudnn_benchmark") or _DEFAULT_CUDNN_BENCHMARK
    tf32 = knobs.value("tf32")
    never = tf32 == TF32_NEVER
    torch.backends.cuda.matmul.allow_tf32 = tf32 == ON or (not never and _DEFAULT_MATMUL_TF32)
    torch.backends.cudnn.allow_tf32 = tf32 == ON or (not never and _DEFAULT_CUDNN_TF32)


def autocast_factory(device: torch.device, knobs: Knobs) -> Callable[[], contextlib.AbstractContextManager]:
    """What each forward runs under: bf16 autocast with ``amp=bf16``, else nothing.

    Autocast's cast cache is off under ``cuda_graph`` (PyTorch requires it: cached casts made
    during capture would be freed with the capture's memory)."""
    if knobs.value("amp") == OFF:
        return contextlib.nullcontext
    cache = not knobs.on("cuda_graph")
    return lambda: torch.autocast(device.type, dtype=torch.bfloat16, cache_enabled=cache)


def memory_format(knobs: Knobs) -> torch.memory_format:
    return torch.channels_last if knobs.on("channels_last") else torch.contiguous_format


def to_device(
    tensors: Sequence[torch.Tensor], device: torch.device, fmt: torch.memory_format = torch.contiguous_format
) -> tuple[torch.Tensor, ...]:
    """Copy to ``device`` on the current stream without blocking the host; 4-D tensors in
    ``fmt`` (``memory_format(knobs)``; a no-op for tensors already there)."""
    out = []
    for t in tensors:
        if t.dim() == 4 and fmt is torch.channels_last:
            out.append(t.to(device, non_blocking=True, memory_format=fmt))
        else:
            out.append(t.to(device, non_blocking=True))
    return tuple(out)


# Inductor's own switch of convolutions to channels_last breaks ``ConvTranspose2d``'s weight
# gradient on CUDA (torch 2.11, H100: "assert_size_stride … convolution_backward", encdec's
# decoder; pytorch/pytorch#171622). Layout is the ``channels_last`` knob's job here, so the
# compiler keeps the layout it is given: a per-call option (the backward, compiled later, gets it
# too), not the process-wide ``torch._inductor.config``.
COMPILE_OPTIONS: dict[str, Any] = {"layout_optimization": False}


class ModuleKnobs:
    """The model modules of a workload as the knobs want them: layout, and compiled or not.

    Keeps each eager module and one compiled wrapper per (module, mode), so turning compile
    off and on again (or changing the batch size) does not build a new wrapper."""

    def __init__(self, modules: dict[str, torch.nn.Module]) -> None:
        self.eager = dict(modules)
        self._compiled: dict[tuple[str, str], torch.nn.Module] = {}

    def resolve(self, knobs: Knobs) -> dict[str, torch.nn.Module]:
        """The module to use under each name, after setting the weights' memory format."""
        fmt = memory_format(knobs)
        mode = knobs.value("compile")
        out: dict[str, torch.nn.Module] = {}
        for name, module in self.eager.items():
            module.to(memory_format=fmt)  # in place: parameters keep their identity (the optimizer's)
            if mode == OFF:
                out[name] = module
                continue
            key = (name, mode)
            if key not in self._compiled:
                options = compile_options(mode, COMPILE_OPTIONS)  # mode's options, and these
                self._compiled[key] = torch.compile(module, options=options, dynamic=False)  # type: ignore[assignment]  # a Module compiles to an OptimizedModule; the stub says a callable
            out[name] = self._compiled[key]
        return out


def match_state_layout(optimizer: torch.optim.Optimizer) -> None:
    """Give each optimizer state tensor shaped like its parameter the parameter's strides, after
    the ``channels_last`` knob relaid the weights in place: the fused and foreach kernels want
    parameters, gradients and state alike (fused SGD refuses a mix)."""
    for p, state in optimizer.state.items():
        if not isinstance(p, torch.Tensor):
            continue
        for key, value in state.items():
            if torch.is_tensor(value) and value.shape == p.shape and value.stride() != p.stride():
                relaid = torch.empty_like(p)  # preserve_format: the parameter's strides
                relaid.copy_(value)
                state[key] = relaid


@contextlib.contextmanager
def restore_point(
    parameters: Sequence[torch.nn.Parameter],
    optimizer: torch.optim.Optimizer,
    generators: Sequence[torch.Generator] = (),
) -> Iterator[None]:
    """Run warm-up steps inside; afterwards the parameters, the optimizer's state, the given
    generators and Python's ``random`` are as they were (copied back in place: addresses a
    captured graph holds stay valid). Optimizer state the warm-up created (SGD's momentum
    buffer) is zeroed, which SGD's next step treats exactly as "no buffer yet"."""
    saved_params = [p.detach().clone() for p in parameters]
    saved_state = {
        id(p): {k: v.clone() if torch.is_tensor(v) else v for k, v in optimizer.state[p].items()}
        for p in parameters
        if p in optimizer.state
    }
    saved_gens = [g.get_state() for g in generators]
    saved_random = random.getstate()
    try:
        yield
    finally:
        with torch.no_grad():
            for p, saved in zip(parameters, saved_params, strict=False):
                p.copy_(saved)
            for p in parameters:
                before = saved_state.get(id(p), {})
                for k, v in optimizer.state.get(p, {}).items():
                    if not torch.is_tensor(v):
                        continue
                    if k in before:
                        v.copy_(before[k])
                    else:
                        v.zero_()
        for g, state in zip(generators, saved_gens, strict=False):
            g.set_state(state)
        random.setstate(saved_random)


def _clone_out(out: Any) -> Any:
    if isinstance(out, tuple):
        return tuple(t.clone() for t in out)
    return out.clone()


class GraphedStage:
    """A stage function captured once as a CUDA graph, then replayed.

    A call copies its tensor arguments (host or device) into the graph's static inputs on the
    current stream (so a pipeline's producer does its own host-to-device copy: rule 2), replays
    the graph on the current stream, and returns *clones* of the static outputs: what it hands
    on is ordinary memory that the next replay cannot overwrite, so the stream rules (events,
    ``record_stream``) apply to it unchanged. Capture happens at the first call, which must be
    ``Workload.warm_up``'s (under a ``restore_point``: the recipe's warm-up calls train).
    """

    def __init__(
        self, fn: Callable[..., Any], device: torch.device, generators: Sequence[torch.Generator] = ()
    ) -> None:
        self.fn, self.device, self.generators = fn, device, tuple(generators)
        self.graph: torch.cuda.CUDAGraph | None = None
        self.static_in: tuple[torch.Tensor, ...] = ()
        self.static_out: Any = None
        self._captured_with: list[tuple[Any, ...]] = []  # the inputs' shapes and dtypes at capture

    def _signature(self, args: Sequence[torch.Tensor]) -> list[tuple[Any, ...]]:
        return [(tuple(a.shape), a.dtype) for a in args]

    def capture(self, args: Sequence[torch.Tensor]) -> None:
        current = torch.cuda.current_stream(self.device)
        self.static_in = tuple(torch.empty_like(a, device=self.device) for a in args)
        for s, a in zip(self.static_in, args, strict=False):
            s.copy_(a)
        side = torch.cuda.Stream(self.device)
        side.wait_stream(current)
        with torch.cuda.stream(side):
            for _ in range(GRAPH_WARMUP_CALLS):
                self.fn(*self.static_in)
        current.wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        for g in self.generators:
            graph.register_generator_state(g)
        try:
            with torch.cuda.graph(graph, capture_error_mode="thread_local"):
                self.static_out = self.fn(*self.static_in)
        except Exception as exc:  # noqa: BLE001 - whatever the step did that a graph cannot hold
            # A failed capture can leave its side stream current (torch's graph context exits
            # early when capture_end raises): put the stream back before saying why.
            torch.cuda.set_stream(current)
            self.static_in, self.static_out = (), None
            raise WorkloadError(capture_refusal(exc)) from exc
        self.graph = graph
        self._captured_with = self._signature(self.static_in)

    def __call__(self, *args: torch.Tensor) -> Any:
        if self.graph is None:
            self.capture(args)
        elif self._signature(args) != self._captured_with:
            raise WorkloadError(
                f"knob cuda_graph: the step was captured with inputs {_shapes(self._captured_with)} and "
                f"now gets {_shapes(self._signature(args))}; a captured graph needs the same shapes every step"
            )
        for s, a in zip(self.static_in, args, strict=False):
            s.copy_(a, non_blocking=True)
        assert self.graph is not None  # capture() set it
        self.graph.replay()
        return _clone_out(self.static_out)


def capture_refusal(exc: BaseException) -> str:
    """Why a step could not be captured, in one line: the first error of the chain (a failed
    capture's own "operation failed due to a previous error" comes after the cause)."""
    first = exc
    while first.__context__ is not None and not first.__suppress_context__ and first.__context__ is not first:
        first = first.__context__
    said = (str(first).strip().splitlines() or [type(first).__name__])[0]
    return (
        f"knob cuda_graph cannot capture this step: {said} (a captured graph cannot make the host wait "
        "— .item(), .cpu(), printing a tensor, a shape that depends on the data — nor change shapes)"
    )


def _shapes(signature: list[tuple[Any, ...]]) -> str:
    return ", ".join(str(shape) for shape, _dtype in signature)


def stage(
    fn: Callable[..., Any], device: torch.device, knobs: Knobs, generators: Sequence[torch.Generator] = ()
) -> Callable[..., Any]:
    """``fn`` as the knobs run it: captured and replayed under ``cuda_graph``, else as it is."""
    if knobs.on("cuda_graph"):
        return GraphedStage(fn, device, generators)
    return fn
