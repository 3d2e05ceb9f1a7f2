"""Step timing across two threads, with no host-device sync: the training thread stamps groups
of steps, the writer thread reads the stamps back once they are complete.

The training thread (``StepStamps.add``, ``mark``, ``note``, ``close_group``) only appends to
``pending``; the writer thread (``collect``) only removes from its left end and sets ``group``.
A ``collections.deque``'s append and popleft are atomic in CPython, so no lock is taken on the
training thread. Entries come out in the order the training thread made them: a mark is
handed over only after every step before it has completed.

As ``gpudash.engine.measure.CudaStepTimer`` does (which reads its events on the thread that
records them; here another thread reads them, and the steps carry their sample counts):

- on CUDA a stamp is an event (``enable_timing=True``) recorded on the current stream after the
  group's last step, read back with ``query()`` and ``elapsed_time()`` once complete: neither
  blocks the host, and neither goes through torch's sync check. CUDA events may be queried from
  any host thread; the writer thread makes the tracked device current for itself first.
- on the CPU a stamp is ``time.perf_counter()``: a step's time is the time between the ends of
  consecutive steps (the loop's whole iteration, data loading included).
- steps faster than ``TIMED_GROUP_MS`` are timed in groups (one stamp per ``group`` steps, each
  step given the group's mean); ``group`` follows the measured step time. The first group has
  no stamp before it: its step times are unknown (``None``), its steps are counted.
- memory is bounded: at most ``MAX_PENDING`` stamps wait; past that (a writer stalled behind a
  GPU far behind the host) no stamp is made and the steps join the next group.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from gpudash.engine.measure import MAX_GROUP_STEPS, TIMED_GROUP_MS

MAX_PENDING = 4096  # stamps waiting to be read: ~100 s of 25 ms groups


class Done(NamedTuple):
    """Completed steps: how many, the samples they trained, and each one's time (ms; None: unknown)."""

    steps: int
    samples: int
    ms: float | None


@dataclass(frozen=True)
class Mark:
    """``tracker.mark(text)``: the steps after it are a new stretch named ``text``."""

    text: str


@dataclass(frozen=True)
class Note:
    """A measurement to write as an event row once the steps before it have completed."""

    what: str
    message: str
    details: dict[str, str] = field(default_factory=dict)


Entry = Mark | Note | tuple[Any, int, int]  # (stamp, steps, samples)


class StepStamps:
    """The wall clock's stamps (``perf_counter``); ``CudaStamps`` stamps with CUDA events."""

    def __init__(self) -> None:
        self.pending: deque[Entry] = deque()
        self.group = 1  # steps per stamp now (set by the writer thread)
        self._untimed = 0  # steps since the last stamp (training thread)
        self._untimed_samples = 0
        self._last: Any = None  # the latest stamp read back (writer thread)
        # Marks and notes made (training thread) and handed over (writer thread): each count is
        # written by one thread only, so their difference is read without a lock.
        self.markers_made = 0
        self.markers_taken = 0

    # -- the training thread ------------------------------------------------------------------------
    def add(self, samples: int) -> None:
        """One step ended, having trained ``samples`` samples."""
        self._untimed += 1
        self._untimed_samples += samples
        if self._untimed >= self.group and len(self.pending) < MAX_PENDING:
            self.pending.append((self._stamp(), self._untimed, self._untimed_samples))
            self._untimed = self._untimed_samples = 0

    def close_group(self) -> None:
        """Stamp the steps since the last stamp now, however few (before a mark, at close)."""
        if self._untimed:
            self.pending.append((self._stamp(), self._untimed, self._untimed_samples))
            self._untimed = self._untimed_samples = 0

    def mark(self, text: str) -> None:
        self.close_group()
        self.pending.append(Mark(text))
        self.markers_made += 1

    def note(self, note: Note) -> None:
        self.close_group()
        self.pending.append(note)
        self.markers_made += 1

    @property
    def marker_waiting(self) -> bool:
        """A mark or note is pending behind stamps not yet complete (writer thread)."""
        return self.markers_made > self.markers_taken

    # -- the writer thread --------------------------------------------------------------------------
    def collect(self) -> list[Done | Mark | Note]:
        """What completed since the last call, in order; stops at the first stamp not complete."""
        out: list[Done | Mark | Note] = []
        pending = self.pending
        while pending:
            entry = pending[0]
            if isinstance(entry, (Mark, Note)):
                out.append(pending.popleft())  # type: ignore[arg-type]  # the entry just peeked
                self.markers_taken += 1
                continue
            stamp, steps, samples = entry
            if not self._ready(stamp):
                break
            pending.popleft()
            ms = None
            if self._last is not None:
                ms = self._elapsed_ms(self._last, stamp) / steps
                self._release(self._last)
                self.group = min(MAX_GROUP_STEPS, max(1, int(TIMED_GROUP_MS / ms))) if ms > 0 else MAX_GROUP_STEPS
            self._last = stamp
            out.append(Done(steps, samples, ms))
        return out

    def rest(self) -> list[Done | Mark | Note]:
        """Everything still pending, stamps complete or not (the end: times not read are unknown)."""
        out = self.collect()
        while self.pending:
            entry = self.pending.popleft()
            if isinstance(entry, (Mark, Note)):
                self.markers_taken += 1
                out.append(entry)
            else:
                out.append(Done(entry[1], entry[2], None))
        return out

    def all_complete(self) -> bool:
        """Every stamp pending is complete (or none is pending)."""
        return all(isinstance(e, (Mark, Note)) or self._ready(e[0]) for e in list(self.pending))

    # -- the stamps ---------------------------------------------------------------------------------
    def _stamp(self) -> Any:
        return time.perf_counter()

    def _ready(self, stamp: Any) -> bool:
        return True

    def _elapsed_ms(self, a: Any, b: Any) -> float:
        return float((b - a) * 1000.0)

    def _release(self, stamp: Any) -> None:
        pass


class CudaStamps(StepStamps):
    """CUDA events on the stream current when made, from a small pool (``torch`` passed in: a
    torch-free import). The stream is looked up once: asking torch for the current stream at each
    stamp costs a launch-bound loop more than the event itself."""

    def __init__(self, torch: Any) -> None:
        super().__init__()
        self._torch = torch
        self._pool: deque[Any] = deque()  # events read back, for reuse (writer appends, trainer pops)
        self._stream = torch.cuda.current_stream()

    def _stamp(self) -> Any:
        ev = self._pool.pop() if self._pool else self._torch.cuda.Event(enable_timing=True)
        ev.record(self._stream)  # the user's loop ordered the step's work before it on this stream
        return ev

    def _ready(self, stamp: Any) -> bool:
        return bool(stamp.query())

    def _elapsed_ms(self, a: Any, b: Any) -> float:
        return float(a.elapsed_time(b))  # both complete: no wait

    def _release(self, stamp: Any) -> None:
        if len(self._pool) < 64:
            self._pool.append(stamp)


def weighted_percentile(groups: list[tuple[float, int]], q: float) -> float:
    """``gpudash.engine.measure.percentile`` of the list in which each (ms, n) stands for n steps
    of ms each, without building it: linear interpolation between the two steps around the rank."""
    ordered = sorted(groups)
    total = sum(n for _, n in ordered)
    pos = (total - 1) * q / 100.0
    lo = int(pos)
    frac = pos - lo
    value_lo = value_hi = ordered[-1][0]
    seen = 0
    for i, (ms, n) in enumerate(ordered):
        if lo < seen + n:
            value_lo = ms
            value_hi = ms if lo + 1 < seen + n else (ordered[i + 1][0] if i + 1 < len(ordered) else ms)
            break
        seen += n
    return value_lo + (value_hi - value_lo) * frac
