"""One step of a user's job as its hooks send it (``StepRecord``), parsed from the channel and
refused where it is not one.

A step record, as the job's hooks send it (``gpudash/boot/gpudash_boot/hooks.py``; its fields'
order and names: ``gpudash_boot.wire.RECORD_FIELDS``):
``[step, t, ms, samples, tokens, input_wait_s, syncs, profiled, train_s, dataset_s, collate_s, comm_ms,
batch_bytes, phase_s, new_shape]`` — ``t`` on the
machine's monotonic clock, ``ms`` the step's time (CUDA events on a GPU; None where unknown),
``syncs`` None where not counted, ``profiled`` 1 for a step under a profiler window or the FLOP
counter (counted, but kept out of the step-time percentiles and the statistics: they slow it),
``train_s`` the step's training seconds (None for the first step, whose start is the job's),
``dataset_s`` and ``collate_s`` the part of the input wait the job's own process spent in its
Dataset (``__getitem__``, or an iterable's ``next``) and in collating the batch — 0 where workers
made the batches (older hooks send neither); ``comm_ms`` the longest a collective completed since
the step before was outstanding (None: it has run none, or, with NCCL, a step whose collectives were
not timed — they are, over a step at most every 0.1 s), which a rank's step less is its own work;
``batch_bytes`` the bytes of its batches' tensors (what workers hand over; 0 from older hooks);
``phase_s`` the seconds since the step before that were the job's evaluation, checkpoint, compile or
other (gpudash's profiling left out; 0 from older hooks); ``new_shape`` 1 where a compiled module's
training forward ran at a shape it had not run at before (a recompile, new kernels), 2 where that
module runs as CUDA graphs and recorded them again (0 from older hooks).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from gpudash.boot.gpudash_boot.wire import (
    BATCH_BYTES,
    COLLATE_S,
    COMM_MS,
    DATASET_S,
    MS,
    NEW_SHAPE,
    PHASE_S,
    PROFILED,
    SAMPLES,
    STEP,
    SYNCS,
    TOKENS,
    TRAIN_S,
    WAIT,
    T,
)

MAX_COUNT = 1 << 53  # a step number, samples, tokens or syncs beyond this is no record's
MAX_SECONDS = 1e7  # nor a step of more than about four months
MAX_CLOCK_S = 1e12  # nor a monotonic clock's reading of 30,000 years (NaN fails the comparison too)


@dataclass(frozen=True)
class StepRecord:
    """One step of the job, as received."""

    step: int
    t: float  # monotonic seconds at the step's boundary
    ms: float | None
    samples: int
    tokens: int
    input_wait_s: float
    syncs: int | None
    profiled: bool
    train_s: float | None = None  # seconds of training since the step before (None: unknown, the first)
    pid: int = 0  # the process that stepped (several may step as one rank: one after another, or at once)
    dataset_s: float = 0.0  # of the input wait: in the Dataset, in this process (0: workers made the batch)
    collate_s: float = 0.0  # ... and collating the batch
    comm_ms: float | None = None  # the longest collective since the step before (None: none run)
    batch_bytes: int = 0  # the bytes of its batches' tensors (0: none, or older hooks)
    phase_s: float = 0.0  # of the time since the step before, the job's phases' (an evaluation, a checkpoint, …)
    new_shape: bool = False  # a compiled module's training forward ran at a shape not seen before in it ...
    graphs_again: bool = False  # ... and, compiled to run as CUDA graphs, recorded them again

    @property
    def after_phase(self) -> bool:
        """An evaluation, a checkpoint, a compile or a pause of the job's came since the step before:
        what the step's syncs and host time add up is not training alone."""
        return self.phase_s > 0.0

    @property
    def own_ms(self) -> float | None:
        """The step's training time less its longest collective's (None where either is unknown,
        or where the collective outlasted the step: the first, NCCL's set-up in it, is not a wait)."""
        if self.train_s is None or self.comm_ms is None or self.comm_ms > self.train_s * 1e3:
            return None
        return self.train_s * 1e3 - self.comm_ms

    @classmethod
    def parse(cls, raw: Any, offset_s: float = 0.0, pid: int = 0) -> StepRecord | None:
        """A record from the channel, its time moved by ``offset_s`` onto gpudash's clock; None when
        it is not one: a field of the wrong type, a number not finite, negative or beyond bounds."""
        try:
            record = cls(
                int(raw[STEP]),
                float(raw[T]) + offset_s,
                None if raw[MS] is None else float(raw[MS]),
                int(raw[SAMPLES]),
                int(raw[TOKENS]),
                float(raw[WAIT]),
                None if raw[SYNCS] is None else int(raw[SYNCS]),
                bool(raw[PROFILED]),
                _seconds(raw[TRAIN_S]) if len(raw) > TRAIN_S else None,
                pid,
                (_seconds(raw[DATASET_S]) or 0.0) if len(raw) > DATASET_S else 0.0,
                (_seconds(raw[COLLATE_S]) or 0.0) if len(raw) > COLLATE_S else 0.0,
                _seconds(raw[COMM_MS], MAX_SECONDS * 1e3) if len(raw) > COMM_MS else None,
                int(raw[BATCH_BYTES] or 0) if len(raw) > BATCH_BYTES else 0,
                (_seconds(raw[PHASE_S]) or 0.0) if len(raw) > PHASE_S else 0.0,
                bool(raw[NEW_SHAPE]) if len(raw) > NEW_SHAPE else False,
                raw[NEW_SHAPE] == 2 if len(raw) > NEW_SHAPE else False,
            )
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
        return record if record.sane() else None

    def sane(self) -> bool:
        """Every number finite and within what a training step can be."""
        counts = (self.step, self.samples, self.tokens, self.syncs or 0, self.batch_bytes)
        if not all(0 <= n < MAX_COUNT for n in counts) or not abs(self.t) < MAX_CLOCK_S:
            return False
        return all(x is None or (math.isfinite(x) and 0 <= x < MAX_SECONDS * 1e3) for x in (self.ms, self.input_wait_s))


def _seconds(value: Any, limit: float = MAX_SECONDS) -> float | None:
    """A step's seconds (or, ``limit`` times 1000, its ms): finite and not negative, else unknown."""
    if value is None:
        return None
    seconds = float(value)
    return seconds if 0.0 <= seconds < limit else None
