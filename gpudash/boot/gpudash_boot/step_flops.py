"""The model FLOPs of one optimizer step of a job (``gpudash -- CMD``), counted by gpudash's hooks
(``hooks.py``). Standard library and the job's own torch only.

What is counted: one step's whole iteration, from the end of a step to the end of the next — the
batch drawn, the forward and backward passes of every micro-batch, the optimizer's step — eagerly,
under gpudash's counting mode (``flop_count.py``: torch's FLOP formulas), by dtype, on the thread
that steps (each rank of a data-parallel job counts its own). The hooks start it after a step timed
without any work of gpudash's (``untraced_s``; the first step is the start-up) and not over a step
of another one-off measurement (the memory's sampled step): the fourth, in most jobs. It is
bounded:

- it gives up once its step has run ``BUDGET`` times its untraced time, or ``FLOOR_S`` more than
  it where that is longer (checked at each operator; its mode is left at the next backward pass's
  start or end, or the step's end);
- in a step whose optimizer evaluates a closure, the count ends with the closure's first backward
  pass; a step that evaluated it again (LBFGS, up to ``max_iter`` times) is not one count: none.

One record goes to gpudash: the FLOPs, their shares by dtype and the device's name, or why there
is no count, with the counted step's time and its untraced time (what the count cost the job):

- the job called ``torch.compile`` during the counted step, or compiled a function or a module in
  place: compiled code runs no operator the counter sees (``torch.compile`` is wrapped, to note
  it). A module passed to ``torch.compile`` before is counted otherwise: its training forward calls
  over the step after the one timed, run again on its uncompiled original on fake tensors
  (``compiled_flops.py``), the count's time gpudash's own between two steps. A model compiled in
  parts (its blocks one by one, its head eager) is counted over the step after that one, eagerly:
  ``torch.compiler.set_stance("force_eager")`` runs its compiled code uncompiled for that step alone
  (bounded as an eager count is, with ``COMPILED_FLOOR_S`` as its floor), its cost said;
- the stream was capturing a CUDA graph;
- the second step's hook ran on another thread than the first's, or a dispatch mode of the job's
  own was entered over the count and is still there: the count cannot be left there and then, so
  it is left at a later step boundary where it can be;
- anything in the count failed (a FLOP formula included): one line on stderr, the count's modes
  left; the hooks' other measurements go on.

Test-only: ``GPUDASH_JOB_FAULT=flops@start`` (or ``flops@stop``) makes the count raise there.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from .compiled_flops import HOW, CompiledForwards
from .flop_count import FlopCount
from .phase_signals import note_compile
from .wire import FAULT_ENV, FLOPS

BUDGET = 2.0  # the counted step may take this many times its untraced time; past it the count gives up ...
FLOOR_S = 0.5  # ... unless that is less than this much of the job's time more (a short step's count costs little)
# a compiled model's count on fake tensors: a one-off between two steps, of a second or two for a GPT-2's dozen
# layers in Python whatever its step's time: bounded by this, or twice a step where that is longer
COMPILED_FLOOR_S = 5.0


class InjectedFault(RuntimeError):
    """``GPUDASH_JOB_FAULT``'s failure (tests)."""


class StepFlopsCount:
    """The count of one step's FLOPs in a job's process: ``at_step`` at each step boundary."""

    def __init__(self, torch: Any, send: Callable[[dict[str, Any]], None]) -> None:
        self.torch = torch
        self.send = send
        self.compiled = ""  # when the job called torch.compile ("": it has not)
        self.before_first = True  # the job has made no step yet
        self.untraced_s: float | None = None  # the counted step's bound: a step's time untraced
        self.left = False  # the count's mode was left inside its step (a closure's evaluation, its time up) ...
        self.counted: Any = None  # ... having counted this
        self.step = 0  # the number of the step now ending
        self.count: FlopCount | None = None  # while it runs
        self.thread = 0  # the thread it runs on
        self.cuda = False
        self.device_name: str | None = None
        self.done = False  # the record (the count, or why not) went out
        self.stranded = False  # the count ended, its modes still to be left (another thread, the job's mode)
        self.fault = os.environ.get(FAULT_ENV, "")
        self._compile: Any = None
        self.forwards = CompiledForwards(torch)  # a compiled job's: its compiled modules' forward calls
        self.ours: tuple[float, float] | None = None  # the compiled count's span between two steps: gpudash's time
        self.eager: tuple[Any, str] | None = None  # a step run eagerly to be counted: its stance's hold, and why

    @property
    def running(self) -> bool:
        """The count runs: the step now ending is the counted one (slowed by the counter)."""
        return self.count is not None and not self.stranded

    def install(self) -> None:
        """Wrap ``torch.compile`` to note that the job compiles."""
        self._compile = note_compile(self.torch, self._compiling, self.forwards.watch)

    def _compiling(self) -> None:
        if self.count is not None:
            self.compiled = "during the counted step"
        else:
            self.compiled = "before its first optimizer step" if self.before_first else "before the counted step"

    def at_step(
        self,
        device: str,
        rank: int,
        untraced_s: float | None = None,
        step_s: float | None = None,
        evaluations: int = 0,
        step: int = 0,
        optimizer: Any = None,
    ) -> None:
        """At the end of one of the job's steps (``step``, its number): start the count (bounded by
        ``untraced_s``, a step's time without it), end it and send the record (its step took
        ``step_s``; ``evaluations``: its closure's; ``optimizer``: the job's, whose parameters a
        compiled model's count must hold), or leave a stranded count's modes where that can be done."""
        self.step = step
        if self.done and not self.stranded:
            return
        try:
            if self.stranded:
                self._leave()
            elif self.forwards.recording:
                self._count_compiled(device, rank, optimizer)
            elif self.count is None:
                self._start(device, rank, untraced_s)
            else:
                self._stop(rank, step_s, evaluations)
        except Exception as exc:  # noqa: BLE001 - the count gives up; the job and the other hooks go on
            self._failed(exc, rank)

    def backward_point(self, closure_evaluated: bool) -> None:
        """A backward pass of the job starts or ends inside the counted step: the count's mode is
        left here where its time is up or (``closure_evaluated``) it holds a closure's evaluation."""
        count = self.count
        if count is None or self.stranded or self.left or not (closure_evaluated or count.overran):
            return
        if threading.get_ident() != self.thread or not count.on_top():
            count.pass_through()  # left at the step's end
            return
        self.counted, self.left = count.stop(), True

    def _start(self, device: str, rank: int, untraced_s: float | None, eager_why: str = "") -> None:
        """Start the count of the next step: eagerly; or, for a compiled job, by its compiled forward
        calls; or (``eager_why``: the model is compiled in parts) eagerly with its compiled code
        run uncompiled for that step (``torch.compiler.set_stance("force_eager")``)."""
        torch = self.torch
        self.cuda = device.startswith("cuda")
        why = self._why_not("before its first optimizer step", compiled=not self.forwards.watched and not eager_why)
        if why:
            self._send(rank, None, why)
            return
        if self.cuda:
            self.device_name = str(torch.cuda.get_device_name(torch.device(device)))
        if self.compiled and not eager_why:  # the next step's compiled forward calls, counted at its end
            self.untraced_s, self.forwards.recording = untraced_s, True
            return
        self._fault("start")
        count = FlopCount(torch)
        self.untraced_s = untraced_s
        if untraced_s:
            floor = COMPILED_FLOOR_S if eager_why else FLOOR_S  # (a compiled step run eagerly: slower still)
            count.deadline = time.monotonic() + max(BUDGET * untraced_s, untraced_s + floor)
        if eager_why:
            self.eager = (torch.compiler.set_stance("force_eager"), eager_why)  # (applied as it is made)
        count.start()
        self.count, self.thread = count, threading.get_ident()

    def _compiled_again(self) -> str:
        """The compiled code runs again from the next step (a count that ran it eagerly ends): why it
        was run eagerly, or "" where it was not."""
        held, self.eager = self.eager, None
        if held is None:
            return ""
        held[0].__exit__(None, None, None)  # the stance before it
        return held[1]

    def _stop(self, rank: int, step_s: float | None, evaluations: int) -> None:
        count = self.count
        assert count is not None  # (at_step stops a count it started)
        eager_why = self._compiled_again()  # (whatever becomes of the count: the compiled code runs again)
        if not self.left and threading.get_ident() != self.thread:
            self._strand(count)
            self._send(rank, None, "the second optimizer step ran on another thread than the first")
            return
        if not self.left and not count.on_top():
            self._strand(count)
            self._send(rank, None, "the job entered a dispatch mode of its own during the counted step")
            return
        self._fault("stop")
        counted = self.counted if self.left else count.stop()
        self.count, self.counted, self.left = None, None, False
        why = self._why_not("during the counted step", compiled=not eager_why)
        if not why and count.overran:
            why = f"the count gave up: its step ran past {BUDGET:g}× its untraced time ({self.untraced_s:.3g} s)"
        if not why and evaluations > 1:
            why = f"the optimizer evaluated its closure {evaluations} times in the counted step (LBFGS): not one count"
        if not why and count.errors:
            why = f"torch could not count an operator's FLOPs ({count.errors[0]})"
        how = f"the step run eagerly (torch.compiler.set_stance('force_eager')): {eager_why}" if eager_why else ""
        self._send(rank, None if why else counted, why, step_s, how=how if not why else "")

    def _count_compiled(self, device: str, rank: int, optimizer: Any) -> None:
        """The compiled forward calls of the step now ending, counted on fake tensors (its span: ours);
        a model compiled in parts is counted over the next step instead, run eagerly."""
        began, untraced = time.monotonic(), self.untraced_s
        deadline = began + max(BUDGET * untraced, COMPILED_FLOOR_S) if untraced else None
        self._fault("stop")
        counted, why = self.forwards.count(deadline, optimizer)
        if self.forwards.part:
            self._start(device, rank, untraced, eager_why=self.forwards.part)
            return
        self.ours = (began, time.monotonic())
        spent = self.ours[1] - began
        self._send(rank, counted, why, untraced + spent if untraced else None, how=HOW if counted else "")

    def _why_not(self, when: str, compiled: bool = True) -> str:
        """Why the step now is not to be counted, or "" (``compiled``: a compile of the job's is a reason)."""
        if self.compiled and compiled:
            if self.forwards.unwatched:
                return f"{self.forwards.unwatched} (the counter sees eager operators only)"
            return f"the job called torch.compile {self.compiled} (the counter sees eager operators only)"
        if self.cuda and self.torch.cuda.is_current_stream_capturing():
            return f"a CUDA graph was being captured {when}"
        return ""

    def _send(self, rank: int, counted: Any, why: str, step_s: float | None = None, how: str = "") -> None:
        self.done = True
        why = " ".join(why.split())  # one line (an error's text may have more)
        message: dict[str, Any] = {"k": FLOPS, "rank": rank, "device_name": self.device_name, "why": why}
        if how:
            message["how"] = how
        if step_s is not None and self.untraced_s:  # what the count cost the job
            message["step_s"], message["untraced_s"], message["step"] = step_s, self.untraced_s, self.step
        if counted is not None:
            message["flops"] = int(counted.total)
            message["by_dtype"] = [[name, int(n)] for name, n in counted.by_dtype]
        self.send(message)

    def _failed(self, exc: Exception, rank: int) -> None:
        """One line on stderr, the count's modes left (or left later), the reason sent."""
        why = " ".join(f"{type(exc).__name__}: {exc}".split())  # one line
        print(f"gpudash: the model FLOPs count is off: {why}", file=sys.stderr, flush=True)
        self._compiled_again()
        if self.count is not None and self.left:  # its mode already left
            self.count, self.left = None, False
        if self.count is not None:
            self._strand(self.count)
            try:
                self._leave()
            except Exception:  # noqa: BLE001, S110 - left at a later step, if ever
                pass
        if not self.done:
            self._send(rank, None, f"the count failed: {why}")

    def _strand(self, count: Any) -> None:
        """The count's mode cannot be left now: it counts no more (it only runs the operators, at a
        Python call's cost each) until a step boundary on its thread finds it on top and leaves it."""
        count.pass_through()
        self.stranded = True

    def _leave(self) -> None:
        """A stranded count's modes, left if they are on top of this (their) thread's stack."""
        count = self.count
        if count is None or threading.get_ident() != self.thread or not count.on_top():
            return
        self.count = None
        self.stranded = False
        count.stop()

    def forked(self) -> None:
        """In a forked child (a DataLoader worker made inside the counted step): the parent's count
        is not its own; its modes are left."""
        count, self.count, self.stranded = self.count, None, False
        self._compiled_again()
        try:
            if count is not None and not self.left and count.on_top():
                count.stop()
        except Exception:  # noqa: BLE001, S110 - a worker under the counter is slower, nothing worse
            pass

    def first_step(self) -> None:
        """The job's first step has ended (a compile from now on is after it)."""
        self.before_first = False

    def close(self) -> None:
        """The hooks are off (or this is a forked child): the count's modes left where they can be,
        ``torch.compile`` given back."""
        self.done = True
        self._compiled_again()
        if self.count is not None and self.left:
            self.count, self.left = None, False
        if self.count is not None:
            self._strand(self.count)
            self._leave()
        if self._compile is not None and getattr(self.torch.compile, "__wrapped__", None) is self._compile:
            self.torch.compile = self._compile

    def _fault(self, point: str) -> None:
        if self.fault == f"flops@{point}":
            raise InjectedFault(f"{FAULT_ENV}={self.fault}")
