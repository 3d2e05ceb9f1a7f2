"""What the job's memory holds, by kind, as gpudash's hooks see it (``gpudash_job_hooks.py``, beside
this file). Standard library and the job's own torch only.

- **parameters, gradients, optimizer state**: counted exactly from the optimizer the job steps (its
  parameter groups, each parameter's ``.grad``, its ``state``; every storage once), at the step
  boundary after the optimizer's first steps (``COUNT_AT``) and every ``COUNT_EVERY`` steps after;
- **frozen parameters**: those of the modules the sampled step calls that do not require grad and
  that no optimizer steps (a teacher, a frozen base: ``gpudash_job_frozen.py``), counted with the
  kinds from then on, sent where there are any;
- **activations**: the tensors autograd saves for backward in one sampled step (``SAMPLE_AT``,
  then every ``SAMPLE_EVERY`` steps), each storage once, the parameters left out (not their
  gradients: ``zero_grad`` frees them, and their memory can hold an activation): a
  ``saved_tensors_hooks`` pair from one step boundary to the next, whose pack hook notes the
  storage and hands the tensor back untouched. A step of several forward/backward passes
  (gradient accumulation) counts its largest pass. Bounded: a step whose optimizer evaluates a
  closure is counted over the closure's first evaluation (its forward and backward pass: LBFGS
  evaluates it up to ``max_iter`` times a step, the same pass each time), and a count whose step
  runs past ``BUDGET`` times its untraced time (and ``FLOOR_S`` more) gives up (not measured, said
  so). Not in a job that
  compiles (``torch.compile``: hooks there could make it compile again) — said so;
- **the allocator** on CUDA: allocated, reserved and peak bytes (host-side counters, no sync), and
  the GPU's total; on the CPU the process's resident set (``/proc/self/statm``).

Read at the flush (``message()``), not every step: a few host calls a flush.
"""

from __future__ import annotations

import contextlib
import gc
import linecache
import os
import re
import sys
import sysconfig
import threading
import time
import warnings
import weakref
from collections.abc import Callable
from typing import Any

from gpudash_job_frozen import ModulesCalled, frozen_bytes  # type: ignore[import-not-found]  # beside this file
from gpudash_job_memhist import MemoryHistory  # type: ignore[import-not-found]
from gpudash_job_parts import load_source  # type: ignore[import-not-found]
from gpudash_job_wire import MEM, OOM  # type: ignore[import-not-found]

_tensor_bytes = load_source("_gpudash_tensor_bytes", os.path.join("core", "tensor_bytes.py"))
count_kinds, local, _storages = _tensor_bytes.count_kinds, _tensor_bytes.local, _tensor_bytes.storages
add_storage = _tensor_bytes.add_storage

COUNT_AT = 2  # the step boundary after which parameters, gradients and optimizer state are counted first
COUNT_EVERY = 200  # ... and again every this many steps
SAMPLE_AT = 3  # the step whose saved tensors are counted first ...
SAMPLE_EVERY = 500  # ... and again every this many steps
LINE_MIN_BYTES = 64 << 10  # a saved tensor this large is put to the job's line that made it ...
TOP_LINES = 5  # ... and this many lines holding the most are sent
BUDGET = 2.0  # the sampled step may take this many times its untraced time; past it the count gives up ...
FLOOR_S = 0.5  # ... unless that is less than this much of the job's time more


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
        self._capture: _SavedTensors | None = None
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
            self.frozen = frozen_bytes(self._frozen, _storages(optimizer, *list(self.optimizers)), add_storage)

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

    def connect(self, send: Callable[[dict[str, Any]], None], phases: Any, rank: Callable[[], int]) -> None:
        """Send the allocator's history to gpudash, and tell it where and with what memory the job
        dies of an out-of-memory error."""
        self.history.send, self.history.rank = send, rank

        def where() -> dict[str, Any]:
            return {"rank": rank(), "step": self.step + 1, "phase": phase_now(phases, self.step)}

        OomWatch(self.torch, self, send, where).install()

    def close(self) -> None:
        capture, self._capture = self._capture, None
        if capture is not None:
            capture.close()
        called, self._called = self._called, None
        if called is not None:
            called.close()
        self.history.close()

    def _sample(self, optimizer: Any, untraced_s: float | None = None) -> None:
        if _compiling_job(self.torch):
            self.not_measured = "the job compiles its model (torch.compile): its saved tensors are not counted"
            return
        with contextlib.suppress(Exception):  # no module watch: no frozen parameters told
            self._called = ModulesCalled(self.torch, self.device, local)
        try:
            if self.torch._C._autograd._top_saved_tensors_default_hooks(True) is not None:
                self.not_measured = "the job's own saved-tensor hooks are on at its step boundary: not counted"
                return
        except Exception:  # noqa: BLE001 - an older torch: no way to tell, no sample
            self.not_measured = "this torch cannot tell whether the job's own saved-tensor hooks are on"
            return
        try:
            self._capture = _SavedTensors(self.torch, _storages(optimizer, *list(self.optimizers)))
            if untraced_s:
                self._capture.deadline = time.monotonic() + max(BUDGET * untraced_s, untraced_s + FLOOR_S)
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


class _SavedTensors:
    """A ``saved_tensors_hooks`` pair, entered now and closed at the next step boundary: each
    storage saved once, the job's parameters left out; the largest forward/backward pass."""

    def __init__(self, torch: Any, params: set[int]) -> None:
        self.params = params
        self.parameter = torch.nn.Parameter  # FSDP2's unsharded parameters too, gathered for the pass
        self.seen: set[int] = set()
        self.current = 0
        self.largest = 0
        self.half = 0  # of the bytes counted, those of 16-bit floats (a mixed-precision step's)
        self.counted = 0
        self.unpacked = False  # a backward ran since the last pack: the next pack begins a new pass
        self.passes = 1  # forward/backward passes in the step (gradient accumulation: several)
        self.stopped = ""  # why the count stopped early (the job turned saved-tensor hooks off: torch.func)
        self.deadline: float | None = None  # (monotonic) past it the count gives up: ``overran``
        self.overran = False
        self.closed = False
        self.sites = _live_sites()  # the job's line of a stack, as sync sites are found (None: not loaded)
        self.pass_lines: dict[str, int] = {}  # this pass's bytes by the job's line
        self.largest_lines: dict[str, int] = {}  # ... and the largest pass's
        self.autograd = torch._C._autograd
        self.autograd._push_saved_tensors_default_hooks(self._pack, self._unpack)
        self.graph = torch.autograd.graph
        self.disable = self.graph.disable_saved_tensors_hooks
        self.graph.disable_saved_tensors_hooks = self._job_disables  # torch.func looks it up at each call

    def _pack(self, tensor: Any) -> Any:
        if self.overran or (self.deadline is not None and time.monotonic() > self.deadline):
            if not self.overran:
                self.overran, self.stopped = True, f"the count gave up: its step ran past {BUDGET:g}× its untraced time"
            return _detached(tensor)
        if self.unpacked:
            self._pass_ended()
            self.seen, self.current, self.unpacked, self.pass_lines = set(), 0, False, {}
            self.passes += 1
        try:
            storage = tensor.untyped_storage()
            key = storage.data_ptr()
            if isinstance(tensor, self.parameter) or isinstance(getattr(tensor, "_base", None), self.parameter):
                key = 0  # a parameter (FSDP2's gathered weights are not the optimizer's): not an activation
            if key not in self.params and key not in self.seen and key:
                self.seen.add(key)
                self.current += (size := int(storage.nbytes()))
                self.counted += size
                self.half += size if tensor.element_size() == 2 and tensor.is_floating_point() else 0
                if size >= LINE_MIN_BYTES and self.sites is not None:
                    where = _job_line_of(self.sites.site(sys._getframe(1)))
                    self.pass_lines[where] = self.pass_lines.get(where, 0) + size
        except Exception:  # noqa: BLE001 - a tensor without a plain storage (a subclass): not counted
            pass
        return _detached(tensor)

    def _unpack(self, tensor: Any) -> Any:
        self.unpacked = True
        return tensor

    def _job_disables(self, *args: Any, **kwargs: Any) -> Any:
        """The job turns saved-tensor hooks off (``torch.func.grad``/``vjp``, which refuse them): the count
        stops there, ours popped first, so that the job's call goes as it would without gpudash."""
        self.stopped = "the job turned saved-tensor hooks off (torch.func): not counted"
        self.close()
        return self.disable(*args, **kwargs)

    def _pass_ended(self) -> None:
        if self.current >= self.largest:
            self.largest, self.largest_lines = self.current, self.pass_lines

    def top_lines(self) -> list[list[Any]]:
        """The job's lines that made the largest pass's saved tensors, the most bytes first."""
        self._pass_ended()
        ranked = sorted(self.largest_lines.items(), key=lambda kv: kv[1], reverse=True)
        return [[where, size] for where, size in ranked[:TOP_LINES]]

    def close(self) -> None:
        """Popped where still on top (a job's own hooks' exit may have popped it already)."""
        self.closed = True
        self._pass_ended()
        if getattr(self.graph, "disable_saved_tensors_hooks", None) == self._job_disables:
            self.graph.disable_saved_tensors_hooks = self.disable
        try:
            top = self.autograd._top_saved_tensors_default_hooks(True)
            if top is not None and top[0] == self._pack:
                self.autograd._pop_saved_tensors_default_hooks()
        except Exception:  # noqa: BLE001 - nothing to undo
            pass


def _detached(tensor: Any) -> Any:
    """What a pack hook hands back: the tensor itself would close a loop through an op that saves
    its own output (relu, exp, softmax), and a graph never backpropagated would never be freed."""
    try:
        return tensor.detach()
    except Exception:  # noqa: BLE001 - as it came
        return tensor


def _has_params(optimizer: Any) -> bool:
    """The optimizer (or the leaves a job's backward passes fill) holds parameters."""
    return any(group["params"] for group in optimizer.param_groups)


def _live_sites() -> Any:
    """gpudash's finder of the job's line in a live stack (``core/sync_sites.py``), loaded as the sync
    count loads it; None where it cannot be."""
    try:
        loaded = sys.modules.get("_gpudash_sync_sites") or load_source(
            "_gpudash_sync_sites", os.path.join("core", "sync_sites.py")
        )
        return loaded.LiveSites()
    except Exception:  # noqa: BLE001 - no lines, the bytes still counted
        return None


def _job_line_of(site: Any) -> str:
    """``train.py:88 attn = q @ k.transpose(-2, -1)``: the job's own line (a library's line: the job's
    that called it); "" where none is known."""
    if site is None:
        return ""
    own = site.called_from if site.package and site.called_from is not None else site
    text = own.text or linecache.getline(own.file, own.line).strip()
    return f"{own.where} {text[:120]}" if text else own.where


def _compiling_job(torch: Any) -> bool:
    """The job has compiled something (dynamo has made a graph)."""
    if "torch._dynamo" not in sys.modules:
        return False
    try:
        counters = sys.modules["torch._dynamo"].utils.counters
        return bool(counters["stats"].get("unique_graphs", 0))
    except Exception:  # noqa: BLE001 - cannot tell: assume it does, count nothing
        return True


def _rss_bytes() -> int | None:
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


# -- out of memory -------------------------------------------------------------------------------
TRIED = re.compile(r"Tried to allocate ([\d.]+) (GiB|MiB|KiB|bytes|B)\b")
UNITS = {"GiB": 1 << 30, "MiB": 1 << 20, "KiB": 1 << 10, "bytes": 1, "B": 1}


class OomWatch:
    """The job dies of an out-of-memory error: before its traceback is printed (the job's own
    ``sys.excepthook`` after ours, unchanged), gpudash is told where — the job's own line, the step
    and phase, the thread where not the main one — and what the memory held then. An error the job
    catches is its own; one that ends a thread of the job's (``threading.excepthook``) is told too."""

    def __init__(
        self,
        torch: Any,
        count: MemoryCount,
        send: Callable[[dict[str, Any]], None],
        where: Callable[[], dict[str, Any]],
    ) -> None:
        self.torch, self.count, self.send, self.where = torch, count, send, where
        self.previous: Any = None
        self.previous_thread: Any = None

    def install(self) -> None:
        self.previous, self.previous_thread = sys.excepthook, threading.excepthook
        sys.excepthook, threading.excepthook = self._hook, self._thread_hook

    def _thread_hook(self, args: Any) -> None:
        try:
            if args.exc_value is not None and is_oom(args.exc_value):
                said = self.message(args.exc_value, args.exc_traceback)
                said["thread"] = str(getattr(args.thread, "name", "") or "a thread")[:80]
                self.send(said)
        except Exception:  # noqa: BLE001, S110 - the thread's own traceback comes all the same
            pass
        (self.previous_thread or threading.__excepthook__)(args)

    def _hook(self, kind: Any, exc: BaseException, tb: Any) -> None:
        try:
            if is_oom(exc):
                self.send(self.message(exc, tb))
        except Exception:  # noqa: BLE001, S110 - the job's own traceback comes all the same
            pass
        (self.previous or sys.__excepthook__)(kind, exc, tb)

    def message(self, exc: BaseException, tb: Any) -> dict[str, Any]:
        said = self.where()  # rank, step, phase
        out: dict[str, Any] = {"k": OOM, **said, "error": str(exc).strip().splitlines()[0][:300] if str(exc) else ""}
        if (tried := TRIED.search(str(exc))) is not None:
            out["tried"] = int(float(tried[1]) * UNITS[tried[2]])
        out.update(_job_line(tb))
        if not self.count.device.startswith("cuda") and "CUDA" in str(exc):  # before the first step
            with contextlib.suppress(Exception):
                self.count.device = f"cuda:{self.torch.cuda.current_device()}"
        figures = self.count.message(int(said.get("rank", 0)))
        if figures is None:  # before the first step: the optimizers found now
            self.count.kinds = _count_all(self.torch)
            figures = self.count.message(int(said.get("rank", 0))) or {}
        out.update({k: v for k, v in figures.items() if k not in ("k", "rank", "step")})
        out["alloc_conf"] = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", os.environ.get("PYTORCH_ALLOC_CONF", ""))
        return out


def is_oom(exc: BaseException) -> bool:
    """torch's out-of-memory error (``torch.OutOfMemoryError``; an older torch's RuntimeError)."""
    if type(exc).__name__ == "OutOfMemoryError":
        return True
    return isinstance(exc, RuntimeError) and "out of memory" in str(exc).lower() and "CUDA" in str(exc)


def _job_line(tb: Any) -> dict[str, Any]:
    """The innermost frame of the job's own files (not torch's, a library's, Python's): its file,
    line and source."""
    skip = [sysconfig.get_paths().get(k, "") for k in ("stdlib", "platstdlib", "purelib", "platlib")]
    skip.append(os.path.dirname(__file__))
    found: dict[str, Any] = {}
    while tb is not None:
        code = tb.tb_frame.f_code
        path = code.co_filename
        if not path.startswith("<") and not any(p and path.startswith(p) for p in skip) and "site-packages" not in path:
            found = {"file": path, "line": tb.tb_lineno, "function": code.co_name}
        tb = tb.tb_next
    if found:
        found["code"] = linecache.getline(found["file"], found["line"]).strip()[:200]
    return found


def _count_all(torch: Any) -> dict[str, int]:
    """Parameters, gradients and state of every optimizer alive (an error before the first step)."""
    totals = {"params": 0, "grads": 0, "optimizer": 0}
    optimizer = torch.optim.Optimizer
    with warnings.catch_warnings():  # (isinstance on some of torch's module objects warns of deprecations)
        warnings.simplefilter("ignore")
        found = [thing for thing in gc.get_objects() if issubclass(type(thing), optimizer)]
    for thing in found:
        for kind, value in count_kinds(thing).items():
            totals[kind] += value
    return totals


def phase_now(phases: Any, steps: int) -> str:
    """What the job was doing: a checkpoint, an evaluation, its first step, or training."""
    if "checkpoint" in getattr(phases, "open", {}):
        return "checkpoint"
    if getattr(phases, "mode_from", None) is not None:
        return "evaluation"
    return "the first step" if steps == 0 else "training"
