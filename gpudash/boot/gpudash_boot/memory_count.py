"""What the job's memory holds, by kind, as gpudash's hooks see it (``hooks.py``). Standard library
and the job's own torch only.

- **parameters, gradients, optimizer state**: counted exactly from the optimizer the job steps (its
  parameter groups, each parameter's ``.grad``, its ``state``; every storage once:
  ``tensor_bytes.py``), at the step boundary after the optimizer's first steps (``COUNT_AT``) and
  every ``COUNT_EVERY`` steps after;
- **frozen parameters**: those of the modules the sampled step calls that do not require grad and
  that no optimizer steps (a teacher, a frozen base: ``frozen.py``), counted with the kinds from
  then on, sent where there are any;
- **activations**: the tensors autograd saves for backward in one sampled step (``SAMPLE_AT``,
  then every ``SAMPLE_EVERY`` steps; ``saved_tensors.py``: how, and its bounds). A step whose
  optimizer evaluates a closure is counted over the closure's first evaluation (its forward and
  backward pass: LBFGS evaluates it up to ``max_iter`` times a step, the same pass each time);
- **the allocator** on CUDA: allocated, reserved and peak bytes (host-side counters, no sync), and
  the GPU's total; on the CPU the process's resident set (``/proc/self/statm``); its history over a
  few steps on request (``memory_history.py``).

Read at the flush (``message()``), not every step: a few host calls a flush. What the memory held
when the job dies of an out-of-memory error is ``oom_watch.py``'s to tell.
"""

from __future__ import annotations

import contextlib
import os
import weakref
from collections.abc import Callable
from typing import Any

from .frozen import ModulesCalled, frozen_bytes
from .memory_history import MemoryHistory
from .saved_tensors import COMPILING, SavedTensors, compiling_job, why_not
from .tensor_bytes import add_storage, count_kinds, local, storages
from .wire import MEM

COUNT_AT = 2  # the step boundary after which parameters, gradients and optimizer state are counted first
COUNT_EVERY = 200  # ... and again every this many steps
SAMPLE_AT = 3  # the step whose saved tensors are counted first ...
SAMPLE_EVERY = 500  # ... and again every this many steps


class MemoryCount:
    """``at_step(step, optimizer)`` at each step boundary (the training thread); ``message(rank)``
    at each flush: the figures to send (None: nothing new)."""

    def __init__(self, torch: Any) -> None:
        self.torch = torch
        self.device = "cpu"
        self.kinds: dict[str, int] = {}  # params, grads, optimizer: bytes
        self.activations: int | None = None
        self.activations_step = 0
        self.not_measured = ""  # why the activations are not measured
        self.half_share: float | None = None  # of the activations, the 16-bit floats' share
        self.lines: list[list[Any]] = []  # [the job's line, bytes of activations it made], the most first
        self.passes = 1  # forward/backward passes in the sampled step
        self.step = 0
        self._capture: SavedTensors | None = None
        self._called: ModulesCalled | None = None  # the sampled step's modules, for its frozen parameters
        self._frozen: list[Any] | None = None  # the frozen parameters it found (weakly), counted with the kinds
        self.frozen: int | None = None  # their bytes, once counted
        self._total: int | None = None
        self.history = MemoryHistory(torch)  # the allocator's history of a few steps, on request
        self.optimizers: weakref.WeakSet[Any] = weakref.WeakSet()  # every one the job steps (a GAN's two)
        self.drawn = 0  # batches the job's DataLoaders handed out so far ...
        self._drawn_at = 0  # ... when the sampled step began
        self._kinds_of: Any = None  # a hand-updated job's leaves, to count at the next backward pass's end

    def seen(self, optimizer: Any) -> None:
        """An optimizer stepped (any of the job's: its memory is the job's too)."""
        with contextlib.suppress(TypeError):
            self.optimizers.add(optimizer)

    def at_step(self, step: int, optimizer: Any, device: str, untraced_s: float | None = None) -> None:
        """At a step's end: the sampled step's count closed, the kinds counted, the next step sampled
        (bounded by ``untraced_s``, a step's time without gpudash's work) where it is due."""
        self.step, self.device = step, device
        called, self._called = self._called, None
        if called is not None:
            self._frozen = called.frozen()
            self._count_frozen(optimizer)
        capture, self._capture = self._capture, None
        if capture is not None:
            capture.close()
            if capture.stopped:
                self.not_measured = capture.stopped
            else:
                self.activations, self.activations_step = capture.largest, step
                self.half_share = capture.half / capture.counted if capture.counted else None
                # forward/backward passes of separate batches (accumulation), not a GAN's several losses
                drawn = self.drawn - self._drawn_at
                self.lines, self.passes = capture.top_lines(), min(capture.passes, drawn or capture.passes)
        if (step == COUNT_AT or (step > COUNT_AT and step % COUNT_EVERY == 0)) and _has_params(optimizer):
            if getattr(optimizer, "by_hand", False):  # its step ends as a backward pass starts, its gradients
                self._kinds_of = optimizer  # reset: counted once that pass has filled them
            else:
                self.kinds = count_kinds(optimizer, *(o for o in list(self.optimizers) if o is not optimizer))
            self._count_frozen(optimizer)  # a base unfrozen since, and added to an optimizer, leaves the count
        if step + 1 == SAMPLE_AT or (step + 1 > SAMPLE_AT and (step + 1) % SAMPLE_EVERY == 0):
            self._sample(optimizer, untraced_s)
        self.history.at_step(step, device)

    def _count_frozen(self, optimizer: Any) -> None:
        """The frozen parameters found, counted against the optimizers' storages now."""
        if self._frozen is not None:
            self.frozen = frozen_bytes(self._frozen, storages(optimizer, *list(self.optimizers)), add_storage)

    def backward_point(self, closure_evaluated: bool, ended: bool = False) -> None:
        """A backward pass of the job starts or ends (``ended``) inside the sampled step: the count
        ends here where its time is up, or (``closure_evaluated``) it holds a closure's whole
        evaluation. A hand-updated job's kinds are counted at a pass's end, its gradients filled."""
        if ended and self._kinds_of is not None:
            self.kinds, self._kinds_of = count_kinds(self._kinds_of), None
        capture = self._capture
        if capture is not None and not capture.closed and (closure_evaluated or capture.overran):
            capture.close()  # read at the step's end

    @property
    def capturing(self) -> bool:
        """The step under way has its saved tensors counted or the allocator's history recorded
        (its time is gpudash's too)."""
        return self._capture is not None or self.history.running

    def message(self, rank: int) -> dict[str, Any] | None:
        """The memory message for gpudash: by kind where new, and the allocator's counters now."""
        if not self.kinds:
            return None
        out: dict[str, Any] = {"k": MEM, "rank": rank, "step": self.step, **self.kinds}
        if self.frozen:
            out["frozen"] = self.frozen
        if self.activations is not None:
            out["activations"], out["activations_step"] = self.activations, self.activations_step
            out["half_share"] = self.half_share
            out["lines"], out["passes"] = self.lines, self.passes
        elif self.not_measured:
            out["activations_not_measured"] = self.not_measured
        out.update(self._allocator())
        return out

    def connect(self, send: Callable[[dict[str, Any]], None], rank: Callable[[], int]) -> None:
        """Send the allocator's history to gpudash."""
        self.history.send, self.history.rank = send, rank

    def close(self) -> None:
        capture, self._capture = self._capture, None
        if capture is not None:
            capture.close()
        called, self._called = self._called, None
        if called is not None:
            called.close()
        self.history.close()

    def _sample(self, optimizer: Any, untraced_s: float | None = None) -> None:
        if compiling_job(self.torch):
            self.not_measured = COMPILING
            return
        with contextlib.suppress(Exception):  # no module watch: no frozen parameters told
            self._called = ModulesCalled(self.torch, self.device, local)
        why = why_not(self.torch)
        if why:
            self.not_measured = why
            return
        try:
            self._capture = SavedTensors(self.torch, storages(optimizer, *list(self.optimizers)), untraced_s)
            self._drawn_at = self.drawn
        except Exception as exc:  # noqa: BLE001 - told to gpudash; the job goes on
            self.not_measured = f"saved tensors not counted: {type(exc).__name__}: {exc}"

    def _allocator(self) -> dict[str, int]:
        torch = self.torch
        if not self.device.startswith("cuda"):
            rss = _rss_bytes()
            return {"rss": rss} if rss is not None else {}
        try:
            device = torch.device(self.device)
            stats = torch.cuda.memory_stats_as_nested_dict(device)  # (memory_stats flattens it first)
            if self._total is None:
                self._total = int(torch.cuda.get_device_properties(device).total_memory)
            allocated, reserved = stats["allocated_bytes"]["all"], stats["reserved_bytes"]["all"]
            out = {
                "allocated": int(allocated["current"]),
                "reserved": int(reserved["current"]),
                "peak": int(allocated["peak"]),
                "reserved_peak": int(reserved["peak"]),
                "total": self._total,
            }
            with contextlib.suppress(Exception):  # the driver's free bytes: others' use of the GPU shows there
                out["free"] = int(torch.cuda.mem_get_info(device)[0])
            return out
        except Exception:  # noqa: BLE001 - no allocator figures: the kinds still go
            return {}


def _has_params(optimizer: Any) -> bool:
    """The optimizer (or the leaves a job's backward passes fill) holds parameters."""
    return any(group["params"] for group in optimizer.param_groups)


def _rss_bytes() -> int | None:
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None
