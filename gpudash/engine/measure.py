"""Measuring a workload's steps without changing what is measured: step times, loss, syncs.

Torch-free at import: the CUDA classes take the ``torch`` module as an argument.

- CUDA step timing: after each ``step()`` (after each group of steps, for steps under 25 ms) an
  event (``enable_timing=True``) is recorded on the current stream (the workload orders all of a
  step's work before it). Pending events wait in a deque and are read back with
  ``event.query()``; the step time is ``elapsed_time`` between consecutive completed events
  (over the group's steps). ``query()`` and ``elapsed_time()`` on completed events never
  block the host, and neither goes through torch's sync check. Events come from a small pool.
- Loss: on CUDA, ``last_loss`` is copied into a pinned host buffer with ``non_blocking=True``
  (an async copy, no sync) and read once its event reports complete; at most one copy is in
  flight and at most two are issued per sample interval. On the CPU, ``float(loss)`` per sample.
- Syncs per step: ``torch.cuda.set_sync_debug_mode("warn")`` makes torch warn on every
  synchronizing operation; a ``warnings.showwarning`` hook counts those raised in the loop's
  thread (autograd replays backward-thread warnings there) and prints none of them. Only
  warnings raised inside ``step()`` are attributed to steps; the drain at a configuration
  change and the loop's own bookkeeping are counted apart (``StepLoop.bookkeeping_syncs``,
  which the GPU tests assert is zero).
"""

from __future__ import annotations

import contextlib
import math
import re
import time
import warnings
from collections import deque
from collections.abc import Iterator
from typing import Any

from gpudash.boot.gpudash_boot import explicit_waits
from gpudash.boot.gpudash_boot.sync_sites import LiveSites, SiteCounter
from gpudash.boot.gpudash_boot.sync_watch import SYNC_WARNING, SyncWatch


def percentile(sorted_values: list[float], q: float) -> float:
    """Linear-interpolated percentile (0-100) of a sorted, non-empty list."""
    if len(sorted_values) == 1:
        return sorted_values[0]
    pos = (len(sorted_values) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


# -- step times ----------------------------------------------------------------------------------
class CpuStepTimer:
    """Wall-clock time around ``step()``: on the CPU a step is done when it returns."""

    def __init__(self) -> None:
        self._t = 0.0
        self._done: list[float | None] = []

    def begin(self) -> None:
        """A step starts now."""
        self._t = time.perf_counter()

    def burst(self) -> int:
        """Steps the loop may issue before the next ``end``: one (each step is timed alone)."""
        return 1

    def end(self, steps: int = 1) -> None:
        """The steps issued since ``begin`` have ended (each given their mean time)."""
        ms = (time.perf_counter() - self._t) * 1000.0 / steps
        self._done.extend([ms] * steps)

    def poll(self) -> list[float | None]:
        """Step times (ms) of the steps ended since the last poll."""
        done, self._done = self._done, []
        return done

    def reset(self, keep_pace: bool = False) -> list[float | None]:
        """After a drain: what ``poll`` returns (nothing carries over on the CPU)."""
        return self.poll()


# Fast steps are timed in groups of about this many ms (one event per group): on an H100's host a
# timing event recorded in a launch-bound loop costs the loop tens of µs, so ~25 ms keeps it ≤ 0.2%.
TIMED_GROUP_MS = 25.0
MAX_GROUP_STEPS = 256


class CudaStepTimer:
    """CUDA events after the steps, read back by ``query()``: no host sync, ever.

    Each event recorded and each one asked about is a CUDA call on the host, on the critical path
    of a host-bound step; the A/B of one event per step against one per group on an H100
    (``python -m benchmarks run engine_overhead -p per_step_events=true``) is in docs/BENCHMARKS.md, "Engine
    overhead". So steps faster than
    ``TIMED_GROUP_MS`` are timed in groups: an event after every ``group`` steps, each step of a
    group given the group's mean time. ``group`` is 1 after each reset and follows the measured
    step time (``group_ms`` / step ms, at most ``MAX_GROUP_STEPS``): a step of 25 ms or more
    is timed alone, as before. Every step is counted exactly either way."""

    def __init__(self, torch: Any, group_ms: float = TIMED_GROUP_MS) -> None:
        self._torch = torch
        self.group_ms = group_ms  # 0: an event after every step
        self._pool: list[Any] = []
        self._pending: deque[tuple[Any, int]] = deque()  # (event, the steps it closes)
        self._last: Any = None  # the latest completed event: the start of the next group's time
        self._untimed = 0  # steps issued since the last event
        self.group = 1  # steps per event now
        # The stream steps end on (the loop thread's current one), looked up once and again at each
        # reset: ``Event.record()`` without it asks torch for the current stream at every step.
        self._stream = torch.cuda.current_stream()

    def begin(self) -> None:
        """A step starts now (the previous event marks its group's start)."""

    def burst(self) -> int:
        """Steps the loop may issue back to back before the next ``end``: the rest of the group."""
        return self.group - self._untimed

    def end(self, steps: int = 1) -> None:
        """The ``steps`` just issued have ended: close their group with an event when it is full."""
        self._untimed += steps
        if self._untimed < self.group:
            return
        ev = self._pool.pop() if self._pool else self._torch.cuda.Event(enable_timing=True)
        ev.record(self._stream)  # the workload orders the whole step before it on this stream
        self._pending.append((ev, self._untimed))
        self._untimed = 0

    def poll(self) -> list[float | None]:
        """Step times (ms) of the steps that completed since the last poll; None = unknown."""
        done: list[float | None] = []
        pending = self._pending
        while pending and pending[0][0].query():
            ev, steps = pending.popleft()
            if self._last is None:
                done.extend([None] * steps)
            else:
                ms = self._last.elapsed_time(ev) / steps  # both complete: no wait
                done.extend([ms] * steps)
                self._pool.append(self._last)
                self.group = min(MAX_GROUP_STEPS, max(1, int(self.group_ms / ms))) if ms > 0 else MAX_GROUP_STEPS
            self._last = ev
        return done

    def reset(self, keep_pace: bool = False) -> list[float | None]:
        """After a drain: collect what completed (steps after the last event: time unknown), and
        start timing afresh (no gap counted). The group goes back to one step until a step is
        timed, unless ``keep_pace``: the same configuration steps on (a later ``run()`` of the
        loop), at the pace already measured."""
        done = self.poll()
        done.extend([None] * self._untimed)
        self._untimed = 0
        if self._last is not None:
            self._pool.append(self._last)
            self._last = None
        if not keep_pace:
            self.group = 1
        self._stream = self._torch.cuda.current_stream()
        return done


StepTimer = CpuStepTimer | CudaStepTimer


def step_timer(torch: Any, on_cuda: bool) -> StepTimer:
    """The step timer for the device: CUDA events on a GPU, the wall clock on the CPU."""
    return CudaStepTimer(torch) if on_cuda else CpuStepTimer()


def cuda_memory_mib(torch: Any, device: Any) -> tuple[float, float, float]:
    """What torch's caching allocator holds on ``device``: (allocated, reserved, peak allocated) MiB.
    Host-side counters, read without a sync, from one read of the nested statistics:
    ``memory_allocated`` and ``memory_reserved`` each flatten the whole dictionary first."""
    stats = torch.cuda.memory_stats_as_nested_dict(device)
    if not stats:  # CUDA not initialised: nothing allocated
        return 0.0, 0.0, 0.0
    allocated = stats["allocated_bytes"]["all"]
    return allocated["current"] / 2**20, stats["reserved_bytes"]["all"]["current"] / 2**20, allocated["peak"] / 2**20


# -- the loss ------------------------------------------------------------------------------------
class CpuLossReader:
    """The latest offered loss, read with ``float()`` at the next poll."""

    def __init__(self) -> None:
        self.value: float | None = None
        self._loss: Any = None

    def want(self) -> None:
        """Ask for a fresh value (on the CPU every offered loss is kept anyway)."""

    def offer(self, loss: Any) -> None:
        """The loss of the step just issued."""
        self._loss = loss

    def poll(self) -> None:
        """Read the latest offered loss into ``value``."""
        if self._loss is not None:
            self.value = float(self._loss)
            self._loss = None


class CudaLossReader:
    """The loss copied into pinned host memory without blocking; read when its event completes."""

    def __init__(self, torch: Any) -> None:
        self._torch = torch
        self._buf: Any = None
        self._event = torch.cuda.Event()
        self._in_flight = False
        self._wanted = True
        self.value: float | None = None

    def want(self) -> None:
        """Ask for a fresh value: the next offered loss is copied."""
        self._wanted = True

    def offer(self, loss: Any) -> None:
        """Copy ``loss`` to the host asynchronously, if a value is wanted and none is in flight."""
        if not self._wanted or self._in_flight or loss is None or loss.numel() != 1:
            return
        torch = self._torch
        if self._buf is None or self._buf.dtype != loss.dtype:
            self._buf = torch.empty((), dtype=loss.dtype, pin_memory=True)
        self._buf.copy_(loss.detach().reshape(()), non_blocking=True)
        self._event.record()
        self._in_flight = True
        self._wanted = False

    def poll(self) -> None:
        """Read the copy into ``value`` once it has completed (never waits)."""
        if self._in_flight and self._event.query():
            self.value = float(self._buf)  # host memory, the copy is complete
            self._in_flight = False


LossReader = CpuLossReader | CudaLossReader


def loss_reader(torch: Any, on_cuda: bool) -> LossReader:
    """A fresh loss reader for the device."""
    return CudaLossReader(torch) if on_cuda else CpuLossReader()


# -- host-device syncs ---------------------------------------------------------------------------
class SyncCounter:
    """Counts torch's "synchronizing CUDA operation" warnings raised in one thread; with ``sites``,
    also attributes each sync raised while ``attributing`` (inside the steps) to its line
    (``gpudash.boot.gpudash_boot.sync_sites``), and counts ``torch.cuda.synchronize()`` and
    ``Event.synchronize()``, which raise no warning (``gpudash.engine.explicit_waits``)."""

    def __init__(self, sites: bool = False) -> None:
        self.count = 0
        self.sites: SiteCounter | None = SiteCounter() if sites else None
        self._live = LiveSites()  # a stack's site, remembered by its frames
        self.attributing = False  # set by the loop around its steps: only their syncs get a site
        self.explicit_not_counted: str | None = None  # why synchronize() calls are not counted (None: they are)
        self._watch: SyncWatch | None = None  # the showwarning hook and the waits' (one thread's)
        self._saved_warnings: Any = None  # the warnings.catch_warnings that restores filters and showwarning
        self._prev_mode: Any = None
        self._torch: Any = None
        self._wrapped = False

    def install(self, torch: Any | None) -> None:
        """Turn on torch's sync warnings (if ``torch`` is given) and start counting them."""
        self._saved_warnings = warnings.catch_warnings()  # the filters and showwarning, restored by uninstall
        self._saved_warnings.__enter__()
        warnings.filterwarnings("always", message=".*" + re.escape(SYNC_WARNING))
        self._watch = SyncWatch(self._counted, warnings.showwarning)
        warnings.showwarning = self._watch
        if torch is not None:
            self._torch = torch
            self._prev_mode = torch.cuda.get_sync_debug_mode()
            torch.cuda.set_sync_debug_mode("warn")
            if self.sites is not None:
                self.explicit_not_counted = explicit_waits.start(torch, self._watch.waited)
                self._wrapped = self.explicit_not_counted is None
        elif self.sites is not None:
            self.explicit_not_counted = "no CUDA device"

    def uninstall(self) -> None:
        """Stop counting; restore torch's sync debug mode and the warning filters."""
        if self._wrapped and self._watch is not None:
            explicit_waits.stop(self._torch, self._watch.waited)
            self._wrapped = False
        if self._torch is not None:
            self._torch.cuda.set_sync_debug_mode(self._prev_mode)
            self._torch = None
        if self._saved_warnings is not None:
            self._saved_warnings.__exit__(None, None, None)  # filters and showwarning as they were
            self._saved_warnings = None

    @contextlib.contextmanager
    def apart(self) -> Iterator[SiteCounter | None]:
        """The syncs of the block attributed to a table of their own (None without sites); the
        counter's own table and ``attributing`` as they were afterwards."""
        held = (self.sites, self.attributing)
        own = SiteCounter() if self.sites is not None else None
        if own is not None:
            self.sites, self.attributing = own, True
        try:
            yield own
        finally:
            self.sites, self.attributing = held

    def _counted(self, frame: Any) -> None:
        self.count += 1
        if self.attributing and self.sites is not None:
            self.sites.add_site(self._live.site(frame))
