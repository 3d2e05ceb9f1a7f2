"""What a job does between its optimizer steps, seen from inside it (gpudash's hooks): evaluation,
checkpoints and compilation as timed spans, so that a step's duration is its training time alone;
and, when gpudash asks, where each of the process's threads waits. Standard library and the job's
torch only (``gpudash_job_hooks.py`` loads this file from the same folder).

- **evaluation**: batches from a ``DataLoader`` iterator other than the training one (two or more
  before the next training batch: one batch of a second loader a step is training), or a module
  switched to eval mode (``model.eval()``) or an ``inference_mode`` block that a training signal
  ends before the next step (a model put in eval mode inside the step, a teacher, is training).
  It ends where training resumes: the training iterator's next batch, ``model.train()``, the
  evaluation loader's end; where none of these comes before the step, after its last batch.
- **checkpoint**: inside ``torch.save``, safetensors' ``save_file``/``save`` and
  ``torch.distributed.checkpoint``'s ``save``/``async_save``/``save_state_dict`` on the training
  thread (a save in a thread of its own overlaps training: not counted).
- **compile**: torch.compile's dynamo compiling (its start and end callbacks), once dynamo is loaded.

Where each thread waits, asked for when a job stalls, is ``gpudash_job_stacks.py``'s.

The saves between two steps are one checkpoint, from the first's start to the last's end (what a
framework does between its saves — a JSON file, the old checkpoints removed — is the checkpoint's
too). Between two steps the spans' union is not training; where they overlap, a second counts once,
as a checkpoint before an evaluation before compiling. What is shorter than ``MIN_SPAN_S`` is part
of the step. The spans go to gpudash at the step's end. Before the first step everything is the
job's start-up, which gpudash times itself.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.util
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

MIN_SPAN_S = 0.05  # a shorter span is part of the step
BEGIN_AFTER_S = 0.5  # an open span is said to gpudash (live) once it has lasted this long
EVAL_BATCHES = 2  # batches of another loader before the next training batch that make an evaluation
EVALUATION, CHECKPOINT, COMPILE = "evaluation", "checkpoint", "compile"
SAVES = {  # module -> its functions that write a checkpoint
    "torch": ("save",),
    "torch.serialization": ("save",),
    "safetensors.torch": ("save_file", "save"),
    "torch.distributed.checkpoint": ("save", "async_save", "save_state_dict"),
}


class Phases:
    """The spans between two step ends; ``at_step`` gives the step's training seconds."""

    def __init__(self, send: Callable[[dict[str, Any]], None], rank: Callable[[], int]) -> None:
        self.send = send
        self.rank = rank
        self.thread: int | None = None  # the training thread (the first step's)
        self.last_end: float | None = None  # the previous step's end (monotonic)
        self.last_train_s = 0.0  # the previous step's training seconds
        self.spans: list[tuple[str, float, float]] = []  # closed since the last step: (kind, start, end)
        self.train_iter = 0  # the iterator whose batch the last step took
        self.draws: dict[int, list[float]] = {}  # other iterators since the last step: id -> [n, first, last end]
        self.mode_from: float | None = None  # model.eval() / inference_mode since the last step
        self.mode_depth = 0  # inside Module.train (it calls itself on each child)
        self.infer_depth = 0
        self.open: dict[str, float] = {}  # checkpoint / compile open now: kind -> start
        self.save_depth = 0
        self.said: set[str] = set()  # kinds whose "begin" went to gpudash
        self.compile_watched = False
        self.min_span_s = MIN_SPAN_S
        self.wrapped: set[int] = set()  # the save functions put in place (torch.save is torch.serialization.save)
        self._originals: list[tuple[Any, str, Any]] = []  # (owner, name, what was there) to put back

    # -- signals (training thread) -------------------------------------------------------------------
    def _ours(self) -> bool:
        return self.thread is not None and threading.get_ident() == self.thread

    def batch(self, iterator: int, start: float, end: float, exhausted: bool) -> None:
        """A ``DataLoader`` iterator handed out a batch (``exhausted``: it ended instead)."""
        if not self._ours():
            return
        if iterator == self.train_iter:
            if not exhausted and (self.draws or self.mode_from is not None):
                self._resolve(start, by_training=True)
            return
        if exhausted:
            if iterator in self.draws:
                self._resolve(end, by_training=True)  # an evaluation loop's end
            return
        d = self.draws.get(iterator)
        if d is None:
            self.draws[iterator] = [1, start, end]
        else:
            d[0] += 1
            d[2] = end

    def mode(self, training: bool) -> None:
        """A top-level ``Module.train(training)`` (``eval()`` is ``train(False)``)."""
        if not self._ours():
            return
        if training:
            if self.draws or self.mode_from is not None:
                self._resolve(time.monotonic(), by_training=True)
        elif self.mode_from is None:
            self.mode_from = time.monotonic()

    def inference(self, entering: bool) -> None:
        if not self._ours():
            return
        if entering:
            self.infer_depth += 1
            if self.infer_depth == 1 and self.mode_from is None:
                self.mode_from = time.monotonic()
        else:
            self.infer_depth = max(0, self.infer_depth - 1)

    def begin(self, kind: str) -> None:
        if self._ours() and kind not in self.open:
            self.open[kind] = time.monotonic()

    def end(self, kind: str) -> None:
        start = self.open.pop(kind, None) if self._ours() else None
        if start is None:
            return
        self.spans.append((kind, start, time.monotonic()))  # (a short one still joins the checkpoint's saves)

    # -- the step -------------------------------------------------------------------------------------
    def at_step(self, now: float, step_iterator: int) -> float | None:
        """At a step's end: the seconds since the previous step's end that were training (None for
        the first step: its start is the job's start-up)."""
        if self.thread is None:
            self.thread = threading.get_ident()
        if not (self.draws or self.mode_from is not None or self.spans or self.said):  # a plain step
            train = None if self.last_end is None else now - self.last_end
            self.last_end, self.last_train_s, self.train_iter = now, train or 0.0, step_iterator
            return train
        first = self.draws.get(step_iterator)
        self.draws.pop(step_iterator, None)  # a new epoch's iterator: training, not another loader
        self._resolve(first[1] if first else None, by_training=False)
        self.train_iter = step_iterator
        away = self._tell_spans(self.last_end if self.last_end is not None else 0.0, now)
        train = None if self.last_end is None else max(0.0, now - self.last_end - away)
        self.last_end, self.last_train_s = now, train or 0.0
        self.spans = []
        return train

    def finish(self) -> None:
        """At the job's exit: the spans since its last step (an evaluation after it), said."""
        if self.last_end is not None and self._ours():
            self._resolve(None, by_training=False)
            self._tell_spans(self.last_end, time.monotonic())

    def _tell_spans(self, since: float, now: float) -> float:
        """The spans since the last step, each kind's own seconds said to gpudash (a second that
        two kinds share counts once: a checkpoint's, then an evaluation's); their union's seconds."""
        spans = [(k, max(s, since), min(e, now)) for k, s, e in self.spans if min(e, now) > max(s, since)]
        saves = [(s, e) for k, s, e in spans if k == CHECKPOINT]
        if saves and max(e for _, e in saves) - min(s for s, _ in saves) >= MIN_SPAN_S:
            spans = [(k, s, e) for k, s, e in spans if k != CHECKPOINT]
            spans.insert(0, (CHECKPOINT, min(s for s, _ in saves), max(e for _, e in saves)))
        elif saves:
            spans = [(k, s, e) for k, s, e in spans if k != CHECKPOINT]
        taken: list[tuple[float, float]] = []
        for kind in (CHECKPOINT, EVALUATION, COMPILE):
            mine = [(s, e) for k, s, e in spans if k == kind]
            seconds = _measure(mine + taken) - _measure(taken)
            taken += mine
            if seconds >= MIN_SPAN_S:
                self._said(kind, min(s for s, _ in mine), max(e for _, e in mine), seconds)
            else:
                self._cancel(kind)
        return _measure(taken)

    def _resolve(self, close: float | None, *, by_training: bool) -> None:
        """End the evaluation candidate at ``close``: an evaluation when another loader handed out
        ``EVAL_BATCHES`` or more, or (``by_training``: a training signal ended it) a module was
        in eval mode or inference_mode; otherwise it was part of the step."""
        loaders = [d for d in self.draws.values() if d[0] >= EVAL_BATCHES]
        starts = [d[1] for d in loaders]
        if by_training and self.mode_from is not None:
            starts.append(self.mode_from)
        self.draws.clear()
        self.mode_from = None
        if not starts:
            if not any(kind == EVALUATION for kind, _, _ in self.spans):  # one already ended stands
                self._cancel(EVALUATION)
            return
        start = min(starts)
        if close is None or (not by_training and loaders and close < max(d[2] for d in loaders)):
            # no training signal came: after the last batch, and its share of the loop's time
            last = max(d[2] for d in loaders) if loaders else start
            n = sum(d[0] for d in loaders)
            close = last + ((last - start) / (n - 1) if n > 1 else 0.0)
        close = min(close, time.monotonic())
        if close - start >= MIN_SPAN_S:
            self.spans.append((EVALUATION, start, close))  # said at the step's end (``_tell_spans``)
        else:
            self._cancel(EVALUATION)

    # -- to gpudash ------------------------------------------------------------------------------------
    def _said(self, kind: str, start: float, end: float, seconds: float) -> None:
        self.said.discard(kind)
        self.send({"k": "phase", "rank": self.rank(), "kind": kind, "t0": start, "t1": end, "s": seconds})

    def _cancel(self, kind: str) -> None:
        if kind in self.said:
            self.said.discard(kind)
            self.send({"k": "phase", "rank": self.rank(), "kind": kind, "cancel": 1})

    def tick(self, now: float) -> None:
        """From the flusher thread: a span open for ``BEGIN_AFTER_S`` is said, once (live); an
        evaluation by eval mode alone once it has lasted two of the last step too (a model put in
        eval mode inside a step is training: the step's end cancels it)."""
        candidates = dict(self.open)
        loaders = [d[1] for d in list(self.draws.values()) if d[0] >= EVAL_BATCHES]
        if loaders:
            candidates[EVALUATION] = min(loaders)
        elif self.mode_from is not None and now - self.mode_from >= 2 * self.last_train_s:
            candidates[EVALUATION] = self.mode_from
        for kind, start in candidates.items():
            if kind not in self.said and now - start >= BEGIN_AFTER_S:
                self.said.add(kind)
                self.send({"k": "phase", "rank": self.rank(), "kind": kind, "t0": start, "open": 1})

    # -- installing ------------------------------------------------------------------------------------
    def install(self, torch: Any) -> None:
        """Module.train, inference_mode and the save functions of the modules loaded now; the
        others as they are imported."""
        phases = self
        module_cls = torch.nn.Module
        original_train = module_cls.train

        @functools.wraps(original_train)
        def train(module: Any, mode: bool = True) -> Any:
            phases.mode_depth += 1
            try:
                return original_train(module, mode)
            finally:
                phases.mode_depth -= 1
                if phases.mode_depth == 0:
                    phases.mode(bool(mode))

        module_cls.train = train
        inference = torch.inference_mode
        enter, exit_ = inference.__enter__, inference.__exit__

        def inference_enter(ctx: Any) -> Any:
            phases.inference(True)
            return enter(ctx)

        def inference_exit(ctx: Any, *exc: Any) -> Any:
            phases.inference(False)
            return exit_(ctx, *exc)

        inference.__enter__, inference.__exit__ = inference_enter, inference_exit
        self._originals += [(module_cls, "train", original_train), (inference, "__enter__", enter)]
        self._originals.append((inference, "__exit__", exit_))
        for name in SAVES:
            if name in sys.modules:
                self._wrap_saves(sys.modules[name])
        sys.meta_path.insert(0, _ImportWatch(self))

    def uninstall(self) -> None:
        for owner, name, original in self._originals:
            setattr(owner, name, original)
        sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _ImportWatch)]

    def _wrap_saves(self, module: Any) -> None:
        for name in SAVES.get(module.__name__, ()):
            original = getattr(module, name, None)
            if original is None or id(original) in self.wrapped:
                continue
            wrapped = self._timed_save(original)
            self.wrapped.add(id(wrapped))
            setattr(module, name, wrapped)
            self._originals.append((module, name, original))

    def _timed_save(self, original: Any) -> Any:
        phases = self

        @functools.wraps(original)
        def save(*args: Any, **kwargs: Any) -> Any:
            phases.save_depth += 1
            if phases.save_depth == 1:
                phases.begin(CHECKPOINT)
            try:
                return original(*args, **kwargs)
            finally:
                phases.save_depth -= 1
                if phases.save_depth == 0:
                    phases.end(CHECKPOINT)

        return save

    def watch_compile(self) -> None:
        """At a step boundary: once torch.compile has loaded dynamo, its compile callbacks."""
        if self.compile_watched or "torch._dynamo.callback" not in sys.modules:
            return
        self.compile_watched = True
        handler = getattr(sys.modules["torch._dynamo.callback"], "callback_handler", None)
        if handler is None or not hasattr(handler, "register_start_callback"):
            return
        handler.register_start_callback(lambda *_: self.begin(COMPILE))
        handler.register_end_callback(lambda *_: self.end(COMPILE))


def _measure(intervals: list[tuple[float, float]]) -> float:
    """The seconds the union of ``intervals`` covers."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(intervals):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


class _ImportWatch(importlib.abc.MetaPathFinder):
    """The save functions of a module of ``SAVES`` wrapped as soon as it is imported (before a
    ``from safetensors.torch import save_file`` binds the original): the bootstrap's way with torch
    (``sitecustomize._TorchWatch``), kept apart since the bootstrap loads nothing of this folder's."""

    def __init__(self, phases: Phases) -> None:
        self.phases = phases
        self._finding = False

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name not in SAVES or self._finding:
            return None
        self._finding = True
        try:
            spec = importlib.util.find_spec(name)
        finally:
            self._finding = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        original = spec.loader.exec_module
        phases = self.phases

        def exec_module(module: Any) -> None:
            original(module)
            try:
                phases._wrap_saves(module)
            except Exception:  # noqa: BLE001, S110 - the job's import must not fail for gpudash
                pass

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec
