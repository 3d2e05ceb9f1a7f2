"""What a job does between its optimizer steps, seen from inside it (gpudash's hooks): evaluation,
checkpoints and compilation as timed spans, so that a step's duration is its training time alone.
The spans are kept here from the signals the hooks pass on: the batches (``loader.py``),
the waits on the GPU (``syncs.py``), and what torch's own functions tell
(``phase_signals.py``: ``Module.train``, ``inference_mode``, the saves, compiling).
Standard library and the job's torch only (``hooks.py`` puts it in).

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
- **other**: a quiet stretch (below) after the step's end or an evaluation's, longer than
  ``OTHER_MEDIANS`` median steps and ``MIN_SPAN_S``: an upload, a barrier, a sleep between steps.
- **profiling**: gpudash's own profiler window starting, or stopping and writing its trace, at a
  step's end (``ours``): neither the job's training nor its ``other`` (under ``MIN_SPAN_S``, part of
  the step, as any span).

Where each thread waits, asked for when a job stalls, is ``stacks.py``'s.

The saves between two steps are one checkpoint, from the first's start until training resumes,
as an evaluation lasts (what a framework does between its saves, and the job after the last one —
an upload, a barrier — are the checkpoint's, however quick the save). A *quiet stretch* runs from
the end of a step, an evaluation or a save to the next thing seen: a batch (any loader's), a wait
on the GPU (a counted sync), a mode switch, a save, compiling, or the first module call (a
training one: train mode, grad on) after a save's end — and, in a job without a training loader,
after a step's end or ``model.train()`` (never once the job calls ``torch.compile``). After a save
it is the checkpoint's; the stretch after the last thing seen is the step's own work. On a GPU
whose syncs are not counted nothing is ``other`` (a wait on it would look quiet). Between two steps
the spans' union is not training; a second two share counts once (profiling, checkpoint, evaluation,
compile, other, in that order). An evaluation, a checkpoint or a compile is its phase's once it
lasts a median step (``_span_floor``: a 40 ms evaluation every 50 steps of 5 ms is not training),
said quietly under ``MIN_SPAN_S`` (counted by gpudash, no line of its own); anything else shorter
than ``MIN_SPAN_S`` is part of the step. The spans go to gpudash at the step's end (their
arithmetic: ``span_tally.py``). Before the first step is the job's start-up (but for the first step's
time inside ``optimizer.step()``, said as training: an LBFGS step's closure evaluations).

**After the last step** nothing follows to make a span a step's: at the job's exit (``finish``)
another loader's batches, or forwards in eval mode, without grad or in ``inference_mode`` since a
mode switch (their ends watched by a global forward hook from the switch until training resumes: the
evaluation watch, ``forward_watch.py``), are an evaluation until the last one's end; a save is a
checkpoint however quick; from the last of these to the exit is teardown.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from .forward_watch import ForwardWatch
from .span_tally import (
    CHECKPOINT,
    COMPILE,
    EVALUATION,
    MIN_SPAN_S,
    ORDER,
    PROFILING,
    Told,
    by_kind,
    measure,
    one_checkpoint,
    other_s,
    quiet_stretches,
    span_floor,
)
from .wire import PHASE

BEGIN_AFTER_S = 0.5  # an open span is said to gpudash (live) once it has lasted this long
EVAL_BATCHES = 2  # batches of another loader before the next training batch that make an evaluation
TOLD = (EVALUATION, CHECKPOINT, COMPILE)  # the kinds the job's own calls tell (not a quiet stretch)
TRAINING = "training"  # the first step's time inside optimizer.step(), said once
MEDIAN_OF = 64  # the latest steps' training seconds the median step is taken over
MAX_MARKS = 1024  # things seen between two steps; past these, no quiet stretch is told that step
TRAIN, WORK = "train", "work"  # a mark: training (a training batch or forward, a wait on the GPU), or other work


class Phases:
    """The spans between two step ends; ``at_step`` gives the step's training seconds."""

    def __init__(self, send: Callable[[dict[str, Any]], None], rank: Callable[[], int]) -> None:
        self.send = send
        self.rank = rank
        self.thread: int | None = None  # the training thread (the first step's)
        self.last_end: float | None = None  # the previous step's end (monotonic)
        self.last_train_s = 0.0  # the previous step's training seconds
        self.phase_s = 0.0  # ... and of the time before it, the job's phases' seconds (gpudash's profiling left out)
        self.spans: list[tuple[str, float, float]] = []  # closed since the last step: (kind, start, end)
        self.train_iter = 0  # the iterator whose batch the last step took
        self.draws: dict[int, list[float]] = {}  # other iterators since the last step: id -> [n, first, last end]
        self.mode_from: float | None = None  # model.eval() / inference_mode since the last step
        self.infer_depth = 0
        self.open: dict[str, float] = {}  # checkpoint / compile open now: kind -> start
        self.said: set[str] = set()  # kinds whose "begin" went to gpudash
        self.min_span_s = MIN_SPAN_S
        self.marks: list[tuple[float, str]] = []  # things seen since the last step: (when, TRAIN or WORK)
        self.last_train = False  # the latest mark is TRAIN, nothing since (a second one adds nothing)
        self.lost = False  # more than MAX_MARKS since the last step
        self.recent: deque[float] = deque(maxlen=MEDIAN_OF)  # the latest steps' training seconds
        self.cuda = False  # the job trains on a GPU (the hooks say so at its first step) ...
        self.syncs: Any = None  # ... and its syncs are counted by this (syncs.SyncCount)
        self.forwards = ForwardWatch(self._first_forward, self._ours)  # training's next forward, an evaluation's
        self.first_began: float | None = None  # the first optimizer step() call's start (its pre-hook)
        self.until_first: Any = None  # that pre-hook's handle, removed at the first step

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
            self._mark(start, TRAIN)  # (its end, too: the epoch's end is the input pipeline's)
            return
        if exhausted:
            if iterator in self.draws:
                self._resolve(end, by_training=True)  # an evaluation loop's end
            return
        d = self.draws.get(iterator)
        if d is None:
            self.draws[iterator] = [1, start, end]
            self._mark(start, WORK)  # (a new epoch's iterator: training, once its step says so)
        else:
            d[0] += 1
            d[2] = end

    def mode(self, training: bool) -> None:
        """A top-level ``Module.train(training)`` (``eval()`` is ``train(False)``); none while
        torch.compile compiles (its tracing switches modes and runs without grad: no evaluation)."""
        if not self._ours() or COMPILE in self.open:
            return
        if training:
            if self.draws or self.mode_from is not None:
                self._resolve(time.monotonic(), by_training=True)
            if self.train_iter == 0:
                self.forwards.arm()  # training resumes: its forward says when
        elif self.mode_from is None:
            self._evaluating(time.monotonic())

    def inference(self, entering: bool) -> None:
        if not self._ours():
            return
        if entering:
            self.infer_depth += 1
            if self.infer_depth == 1 and self.mode_from is None:
                self._evaluating(time.monotonic())
        else:
            self.infer_depth = max(0, self.infer_depth - 1)

    def begin(self, kind: str) -> None:
        if self._ours() and kind not in self.open:
            self.open[kind] = time.monotonic()
            self.last_train = False

    def end(self, kind: str) -> None:
        start = self.open.pop(kind, None) if self._ours() else None
        if start is None:
            return
        self.spans.append((kind, start, time.monotonic()))  # (a short one still joins the checkpoint's saves)
        self.last_train = False
        if kind == CHECKPOINT:
            self.forwards.arm()  # training resumes after it: its next batch or its forward says when

    def ours(self, start: float, end: float) -> None:
        """gpudash's own work at a step's end (a profiler window started, or stopped and its trace
        written), from ``start`` to ``end``: the ``profiling`` phase, not the next step's training."""
        self.spans.append((PROFILING, start, end))

    def waited(self) -> None:
        """The training thread waits on the GPU (a counted sync): training work, a mark."""
        if self._ours():
            self._mark(time.monotonic(), TRAIN)

    def _mark(self, t: float, kind: str) -> None:
        """Something of the job's seen at ``t`` (the quiet stretches end at it)."""
        if kind == TRAIN and self.last_train:
            return
        if len(self.marks) >= MAX_MARKS:
            self.lost = True
            return
        self.marks.append((t, kind))
        self.last_train = kind == TRAIN

    # -- the step -------------------------------------------------------------------------------------
    def optimizer_step_began(self) -> None:
        """torch's optimizer step pre-hook, until the first step: when its ``step()`` call began."""
        if self.first_began is None and self.last_end is None:
            self.first_began = time.monotonic()

    def at_step(self, now: float, step_iterator: int) -> float | None:
        """At a step's end: the seconds since the previous step's end that were training (None for
        the first step: its start is the job's start-up, less its time inside ``optimizer.step()``,
        which is said as training: an LBFGS step's closure evaluations)."""
        if self.thread is None:
            self.thread = threading.get_ident()
            self._first_step(now)
        self.forwards.tail_off()
        self.phase_s = 0.0
        plain = not (self.draws or self.mode_from is not None or self.spans or self.said)
        if plain and not self._quiet_after_step():  # a plain step
            train = None if self.last_end is None else now - self.last_end
            self.train_iter = step_iterator
            return self._stepped(now, train)
        first = self.draws.get(step_iterator)
        if first:  # a new epoch's iterator: training, not another loader
            self.draws.pop(step_iterator)
            self.marks = [(t, TRAIN if t == first[1] else kind) for t, kind in self.marks]
        self._resolve(first[1] if first else None, by_training=False)
        self.train_iter = step_iterator
        away = self._tell_spans(self.last_end if self.last_end is not None else 0.0, now, quiet=True)
        train = None if self.last_end is None else max(0.0, now - self.last_end - away)
        self.spans = []
        return self._stepped(now, train)

    def _first_step(self, now: float) -> None:
        hook, self.until_first = self.until_first, None
        if hook is not None:
            try:
                hook.remove()
            except Exception:  # noqa: BLE001, S110 - removed already
                pass
        began = self.first_began
        if began is not None and now - began >= MIN_SPAN_S:
            self.send({"k": PHASE, "rank": self.rank(), "kind": TRAINING, "t0": began, "t1": now, "s": now - began})

    def _quiet_after_step(self) -> bool:
        """Nothing was seen for over ``MIN_SPAN_S`` after the last step's end (or nothing at all
        was seen since it on a job whose marks are lost): the step is not a plain one."""
        if self.last_end is None or self.lost:
            return False
        return bool(self.marks) and self.marks[0][0] - self.last_end > MIN_SPAN_S

    def _stepped(self, now: float, train: float | None) -> float | None:
        """The step ended at ``now`` after ``train`` seconds of training: the next one's start."""
        self.last_end, self.last_train_s = now, train or 0.0
        if train is not None:
            self.recent.append(train)
        self.marks, self.last_train, self.lost = [], False, False
        if self.train_iter == 0:
            self.forwards.arm()  # no training loader: its next forward says when training resumes
        return train

    def finish(self) -> None:
        """At the job's exit: the spans since its last step, said — an evaluation after it (another
        loader's batches, or forwards in eval mode, under ``no_grad`` or ``inference_mode`` since the
        mode switch, until the last one's end: no step follows to make it a step's), its saves
        however quick; the rest is teardown."""
        if self.last_end is None or not self._ours():
            return
        start, end = self.mode_from, self.forwards.eval_end
        if start is not None and end is not None and end > start:
            self.spans.append((EVALUATION, start, end))
            self.mode_from = None  # (not cancelled below: it ran forwards)
        self.forwards.tail_off()
        self._resolve(None, by_training=False, final=True)
        self._tell_spans(self.last_end, time.monotonic(), quiet=False, final=True)

    def _tell_spans(self, since: float, now: float, *, quiet: bool, final: bool = False) -> float:
        """The spans since the last step with (``quiet``) its quiet stretches, each kind's own
        seconds said to gpudash (a second that two kinds share counts once: a checkpoint's, then an
        evaluation's, compiling's, other's); their union's seconds. ``final``: after the last step,
        where a save is a checkpoint however quick (no step to be part of)."""
        spans = [(k, max(s, since), min(e, now)) for k, s, e in self.spans if min(e, now) > max(s, since)]
        if quiet and self.last_end is not None and not self.lost:
            spans += quiet_stretches(since, spans, self.marks, self._other_s())
        floor = self._span_floor() if spans else MIN_SPAN_S
        spans = one_checkpoint(spans, floor, final)
        ours = [(s, e) for k, s, e in spans if k == PROFILING]
        if ours and measure(ours) < MIN_SPAN_S:  # gpudash's own work, short: part of the step, as a quick save is
            spans = [(k, s, e) for k, s, e in spans if k != PROFILING]
        each, union = by_kind(spans)
        told = [t for t in each if t[3] >= (floor if t[2] in TOLD else MIN_SPAN_S) or _final_save(t, final)]
        kept = {t[2] for t in told}
        for kind in ORDER:
            if kind not in kept:
                self._cancel(kind, final)
        for start, end, kind, seconds in sorted(told):
            self._said(kind, start, end, seconds, quiet=seconds < MIN_SPAN_S and not final)
        self.phase_s = sum(seconds for _, _, kind, seconds in told if kind != PROFILING)
        return union

    def _span_floor(self) -> float:
        return span_floor(self.recent)

    def _other_s(self) -> float:
        blind = self.cuda and (self.syncs is None or getattr(self.syncs, "job_owns_mode", True))
        return other_s(self.recent, blind)

    def _resolve(self, close: float | None, *, by_training: bool, final: bool = False) -> None:
        """End the evaluation candidate at ``close``: an evaluation when another loader handed out
        ``EVAL_BATCHES`` or more, or (``by_training``: a training signal ended it) a module was
        in eval mode or inference_mode; otherwise it was part of the step."""
        self.forwards.tail_off()
        loaders = [d for d in self.draws.values() if d[0] >= EVAL_BATCHES]
        starts = [d[1] for d in loaders]
        if by_training and self.mode_from is not None:
            starts.append(self.mode_from)
        self.draws.clear()
        self.mode_from = None
        self.last_train = False  # the next training mark ends what follows it
        if not starts:
            if not any(kind == EVALUATION for kind, _, _ in self.spans):  # one already ended stands
                self._cancel(EVALUATION, final)
            return
        start = min(starts)
        if close is None or (not by_training and loaders and close < max(d[2] for d in loaders)):
            # no training signal came: after the last batch, and its share of the loop's time
            last = max(d[2] for d in loaders) if loaders else start
            n = sum(d[0] for d in loaders)
            close = last + ((last - start) / (n - 1) if n > 1 else 0.0)
        close = min(close, time.monotonic())
        if close - start >= self._span_floor():
            self.spans.append((EVALUATION, start, close))  # said at the step's end (``_tell_spans``)
        else:
            self._cancel(EVALUATION, final)

    # -- to gpudash ------------------------------------------------------------------------------------
    def _said(self, kind: str, start: float, end: float, seconds: float, quiet: bool = False) -> None:
        """A span ended (``quiet``: counted by gpudash, not said on a line of its own)."""
        self.said.discard(kind)
        message = {"k": PHASE, "rank": self.rank(), "kind": kind, "t0": start, "t1": end, "s": seconds}
        self.send({**message, "quiet": True} if quiet else message)

    def _cancel(self, kind: str, final: bool = False) -> None:
        """A span said to be under way was none (``final``: the job exits, and none ran)."""
        if kind in self.said:
            self.said.discard(kind)
            self.send({"k": PHASE, "rank": self.rank(), "kind": kind, "cancel": 1, "final": int(final)})

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
                self.send({"k": PHASE, "rank": self.rank(), "kind": kind, "t0": start, "open": 1})

    # -- the job's forwards (``forward_watch.py``) ------------------------------------------------------------
    def watch_forwards(self, torch: Any) -> None:
        """The job's signals are in: from now on the forward watch may arm."""
        self.forwards.torch = torch

    def stop_forward_watch(self) -> None:
        """No forward watch again: the job compiles (a global module hook in compiled code would
        break its graph or recompile it), or the hooks go off."""
        self.forwards.stop()

    def _evaluating(self, t: float) -> None:
        """An evaluation may begin at ``t`` (a model put in eval mode, an ``inference_mode`` block, a
        forward without grad after a step): its forwards' ends are watched until training resumes."""
        self.mode_from = t
        self._mark(t, WORK)
        self.forwards.tail_on()

    def _first_forward(self, training: bool) -> None:
        """The first module call since the forward watch was armed: a training mark, or other work
        (an evaluation's, it may be, where it ran without grad after a step; a teacher's)."""
        if training:
            self._mark(time.monotonic(), TRAIN)
        elif self.mode_from is None:
            self._evaluating(time.monotonic())  # a forward without grad: an evaluation's, it may be
        else:
            self._mark(time.monotonic(), WORK)


def _final_save(told: Told, final: bool) -> bool:
    """A save after the last step: a checkpoint however quick (no step to be part of)."""
    return final and told[2] == CHECKPOINT and told[3] > 0
