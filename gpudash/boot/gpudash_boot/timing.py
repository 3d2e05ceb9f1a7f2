"""The time of each step inside a job, for gpudash's hooks (``hooks.py``). Standard library and the
job's own torch only.

On a GPU a step's time is read from CUDA events recorded at the step boundary and read back without
blocking: an event and the question whether it has completed are each a CUDA call between two
steps, which costs a launch-bound step far more than its own time, so steps faster than
``GROUP_MS`` are timed in groups (one event a group, each step the group's mean), as gpudash's own
step timer does (``gpudash/engine/measure.py``). A group whose time holds a phase's (an evaluation
between two steps, say) leaves its steps' time unknown. On the CPU a step's time is its training
seconds (what was not training left out). Records whose time is known wait in ``ready`` for the
outbox (``outbox.py``), which sends them.
"""

from __future__ import annotations

import collections
from typing import Any

from .wire import MS

GROUP_MS = 25.0  # steps faster than this are timed in groups (one CUDA event a group)
MAX_GROUP_STEPS = 256


class StepTimes:
    """The step records of one process, timed: ``add`` each at its step, ``collect`` the groups
    whose event completed, ``settle`` at the end; the records timed are in ``ready``. Called under
    the outbox's lock."""

    def __init__(self, torch: Any, min_span_s: float) -> None:
        self.torch = torch
        self.min_span_s = min_span_s  # a phase shorter than this is part of the step (phases)
        self.group_ms = GROUP_MS
        self.cuda = False  # the steps run on a GPU: timed by CUDA events
        self.stream: Any = None  # the stream the steps end on (looked up once)
        self.last_t = 0.0  # the previous step's boundary
        self.pending: collections.deque[tuple[Any, list[list[Any]]]] = collections.deque()  # (event, its steps)
        self.spanned: set[int] = set()  # steps (their records' ids) whose GPU time holds a phase
        self.untimed: list[list[Any]] = []  # steps since the last event
        self.group = 1  # steps per event: follows the step time (``group_ms``)
        self.pool: list[Any] = []  # events read back, to record again
        self.last_event: Any = None
        self.ready: list[list[Any]] = []  # records to send

    def on_gpu(self, stream: Any) -> None:
        """The steps end on ``stream``, a GPU's: timed by CUDA events from now on."""
        self.cuda = True
        self.stream = stream

    def add(self, record: list[Any], now: float, train_s: float | None) -> None:
        """The record of the step that ended at ``now`` after ``train_s`` seconds of training."""
        if self.cuda and self.torch.cuda.is_current_stream_capturing():
            record[MS] = None  # a CUDA graph being captured: no event may be recorded or asked about
            self.ready.append(record)
        elif self.cuda:
            if train_s is not None and now - self.last_t - train_s >= self.min_span_s:
                self.spanned.add(id(record))  # its GPU time holds an evaluation's, say: unknown
            self.untimed.append(record)
            if len(self.untimed) >= self.group:
                self.close_group()
        else:
            record[MS] = train_s * 1e3 if train_s is not None else None  # what was not training left out
            self.ready.append(record)
        self.last_t = now

    def close_group(self) -> None:
        """An event after the group's last step (from a pool, on the stream the steps end on)."""
        event = self.pool.pop() if self.pool else self.torch.cuda.Event(enable_timing=True)
        event.record(self.stream)
        self.pending.append((event, self.untimed))
        self.untimed = []
        self.collect()

    def collect(self) -> None:
        """The groups whose closing event has completed: each step the group's mean GPU time (no
        wait); the next group's size follows that time."""
        pending = self.pending
        while pending and pending[0][0].query():
            event, records = pending.popleft()
            spanned = [id(r) for r in records if id(r) in self.spanned]
            self.spanned.difference_update(spanned)
            if self.last_event is not None and spanned:
                self.pool.append(self.last_event)  # the group's time holds a phase's: left unknown
            elif self.last_event is not None:
                ms = self.last_event.elapsed_time(event) / len(records)
                for record in records:
                    record[MS] = ms
                self.pool.append(self.last_event)
                self.group = min(MAX_GROUP_STEPS, max(1, int(self.group_ms / ms))) if ms > 0 else MAX_GROUP_STEPS
            self.last_event = event
            self.ready.extend(records)

    def settle(self) -> None:
        """At the end: the steps after the last event, and the groups still running, their time unknown."""
        for _, records in self.pending:
            self.ready.extend(records)
        self.ready.extend(self.untimed)
        self.pending.clear()
        self.untimed = []
