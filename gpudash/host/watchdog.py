"""The parent's watchdog over the workload process: too long without a word is "not responding".

A running workload sends a sample every ``sample_interval_s`` (paused too) and, during slow
changes (compile, capture), a progress event every 2 s, so silence means a hung step or a
stuck process. The limit is the run's ``watchdog_s``, or ``STEP_FACTOR`` times the recent p95
step time when steps are that slow (a sample can only follow a finished step); until the first
step of a configuration has finished (warm-up) it is ``FIRST_STEP_FACTOR`` times longer. The watchdog arms when
the workload has started (torch import and the first build are not watched), stands down
while a stage timing or profiler window is under way (their answer may take many steps), and
reports once per silence. Torch-free.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from gpudash.core.protocol import (
    ENDING_KINDS,
    Control,
    Event,
    EventKind,
    MeasureScaling,
    Message,
    Sample,
    TimeStages,
    TraceWindow,
)

LONG_OPS = (
    TimeStages,
    TraceWindow,
    MeasureScaling,
)  # controls answered by a "measured" or "error" event, maybe much later
LONG_OP_ANSWERS = frozenset({"stages", "trace", "scaling"})  # the ``what`` of those answers
STEP_FACTOR = 5.0  # silence longer than this many recent p95 step times is never a slow step
FIRST_STEP_FACTOR = 5.0  # the first step (lazy initialisation, autotuning) gets this many limits


def not_responding(silent_s: float, pid: int | None) -> str:
    """The line the user sees."""
    who = f" (pid {pid})" if pid is not None else ""
    return f"workload process not responding for {silent_s:.0f} s{who}: no sample or event in that time"


class Watchdog:
    """Tracks when the workload process was last heard from; ``check()`` says when it went quiet."""

    def __init__(self, limit_s: float | None, clock: Callable[[], float] = time.monotonic) -> None:
        self.limit_s = limit_s
        self.clock = clock
        self.reset()

    def reset(self) -> None:
        """A new workload process: not armed until it has started."""
        self.armed = False
        self.stepped = False  # a sample with steps done has come
        self.step_s = 0.0  # the latest p95 step time, seconds
        self.long_ops = 0
        self.unresponsive = False  # silence was reported and nothing was heard since
        self.last_heard = self.clock()

    def sent(self, control: Control) -> None:
        if isinstance(control, LONG_OPS):
            self.long_ops += 1

    def heard(self, msg: Message) -> None:
        """A message came from the workload process."""
        self.last_heard = self.clock()
        self.unresponsive = False
        if isinstance(msg, Sample):
            self.stepped = self.stepped or msg.steps > 0
            if msg.step_ms_p95 is not None:  # None: no step finished in that sample's interval
                self.step_s = msg.step_ms_p95 / 1000.0
            return
        if not isinstance(msg, Event):
            return
        if msg.kind in (EventKind.STARTED, EventKind.CHANGED):
            self.armed = True
            self.stepped = False  # a new configuration's first step may warm up
        elif msg.kind in ENDING_KINDS:
            self.armed = False
        elif msg.what in LONG_OP_ANSWERS and msg.kind in (EventKind.MEASURED, EventKind.ERROR):
            self.long_ops = max(0, self.long_ops - 1)

    def limit(self) -> float | None:
        """How long a silence may last now (None: not watched)."""
        if self.limit_s is None:
            return None
        limit = max(self.limit_s, STEP_FACTOR * self.step_s)
        return limit if self.stepped else FIRST_STEP_FACTOR * limit

    def check(self) -> float | None:
        """The silence in seconds when it has just grown past the limit (once per silence), else None."""
        limit = self.limit()
        if limit is None or not self.armed or self.long_ops or self.unresponsive:
            return None
        silent = self.clock() - self.last_heard
        if silent < limit:
            return None
        self.unresponsive = True
        return silent
