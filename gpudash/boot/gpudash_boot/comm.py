"""Each rank's collectives, as gpudash's hooks see them (``hooks.py``).
Standard library and the job's own torch only.

For every collective the job's process starts through ``torch.distributed`` (FSDP's all-gathers and
reduce-scatters, the job's own calls), every DDP gradient bucket and DDP's broadcast of its buffers
at each forward, the time from the rank's *arrival* — its own work up to the call done — to the
collective's end: a rank that waits for a slower one has its collective outstanding the longer. A
CPU collective (gloo) by the host's clock — entered at the call, completed at its future's
completion. An NCCL one by CUDA events on the device's clock: its arrival, an event on the calling
stream at the call; its end, for a call that waits (``async_op`` not asked), an event on the calling
stream after it — that stream waits for the collective, whichever stream NCCL ran it on — and for
an asynchronous one, an event its work's future's callback records (NCCL completes the future at
once, and runs the callback on a stream that waits for the collective's kernels). From the one to
the other is the collective's time from this rank's arrival: its wait for the other ranks and
behind the collective before it, and its transfer. No ``TORCH_NCCL_ENABLE_TIMING``: NCCL's own
timing cost a DDP ResNet-50 step 1.5 ms of its 30.5 on 2 H200s; a call is never made asynchronous
to be timed. A collective whose end event could not be recorded (a work without a future) is
left out of its step's figure, and that is said; in a CUDA graph's capture the call is the job's
alone. The callback's stream is one of torch's pool of streams, which a job's own
``torch.cuda.Stream()`` may share: there the end reads late by the job's work queued on it. A
collective of another backend on CUDA tensors (gloo) by the host's clock, as a CPU one.

NCCL's collectives are timed over one step at most every ``TIMED_EVERY_S`` (every step of a job
whose steps take longer): the two events and the callback cost a DDP ResNet-50 step 1.3 ms of its
30.5 where every step's were timed (2 H200s). The steps between call them as the job does. A timed
step's figure is given once every collective called in it has ended — at its own end, or at a
later step's where the GPU runs behind the host — and the other steps give none (None), whatever
else (a gloo side group, a barrier) they timed on the host.

DDP's gradient buckets (through DDP's reference hook), its broadcast of its buffers and its arguments:
``ddp.py``.

At each step, ``at_step()`` gives the longest of the collectives completed since the last step:
its step less that time is the rank's own work. The longest, not their sum: DDP's buckets wait for
the slower rank one after another while the rank's own backward goes on beside them — only the
last wait holds its step, and the longest is the one where the slower rank fell furthest behind
(the sum counted every bucket's wait, and made a rank a few ms ahead of another look 4× faster).

Never inside a compiled region (``torch.compiler.is_compiling``), a CUDA graph's capture nor
``_coalescing_manager`` (where a call only queues a collective): there the call is the job's alone.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from .collective_calls import KINDS, device_of, group_id, group_of, nbytes, on_cuda
from .ddp import DdpHooks
from .frames import hidden

NCCL_UNTIMED = (
    "some of NCCL's collectives are not timed (no end event could be recorded for them): "
    "a rank's wait in them is not seen"
)
TIMED_EVERY_S = 0.1  # a step's NCCL collectives timed at most this often (about 1 in 4 of a 30 ms step)
MAX_OPEN = 4096  # collectives not yet completed kept (a job that never steps: the oldest dropped)


class Pending:
    """One collective not yet read: when it was entered (monotonic), its work, whether timed by CUDA
    events, when it completed (a CPU one, set on the backend's thread), its arrival and end events
    (CUDA; the end set by the work's future's callback for an asynchronous call), and its process
    group's id (CUDA collectives of one group run one after another), and the step it was called
    in (counted by ``at_step``). The id, never the group: a CPU collective's callback holds this
    entry, and the job's process group must not live on in it after the job destroyed it."""

    __slots__ = ("entered", "work", "cuda", "completed", "arrival", "end", "group", "period")

    def __init__(self, entered: float, work: Any, cuda: bool, arrival: Any = None, end: Any = None, group: int = 0):
        self.entered, self.work, self.cuda = entered, work, cuda
        self.completed: float | None = None
        self.arrival, self.end, self.group = arrival, end, group
        self.period = 0


class CommTimes:
    """Collectives entered and completed, per step; ``install()`` once torch is imported."""

    def __init__(self, torch: Any, quiet: Callable[[], Any]) -> None:
        self.torch = torch
        self.quiet = quiet  # a block whose host-device syncs are torch.distributed's, not the job's
        self.lock = threading.Lock()
        self.open: list[Pending] = []  # in the order they were called
        self.nccl: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()  # group -> to NCCL
        self.seen = False  # any collective at all: the job is distributed
        self.settings: dict[str, str] = {}  # the DDP model's arguments ({"ddp_bucket_cap_mb": "25", …})
        self.untimed = ""  # why a part of the job's communication is not timed
        self._originals: dict[str, Any] = {}
        self.ddp = DdpHooks(self)  # DDP's buckets, its broadcast and its arguments
        self.sizes: dict[str, list[int]] | None = None  # while a profiler window runs: calls and bytes by kind
        # NCCL's collectives are timed over one step at most every ``every_s``: the events and the
        # callback cost a DDP ResNet-50 step 1.3 ms where each step's were timed (2 H200s, one round)
        self.every_s = TIMED_EVERY_S
        self.timing = True  # this step's NCCL collectives are timed
        self.timed_at = time.monotonic()  # when the last step so timed began (the first: from here)
        self.on_nccl = False  # any NCCL collective timed: figures by timed step, each once all of it is read
        self.period = 0  # the step under way, counted from 0 by at_step
        self.periods: dict[int, bool] = {}  # each step not reported yet: timed or not
        self.longest: dict[int, float] = {}  # by step: the longest of its collectives read so far

    # -- the sizes of a window's collectives (their bytes: the trace's kernels do not say them) ----------
    def start_sizing(self) -> None:
        with self.lock:
            self.sizes = {}

    def take_sizing(self) -> dict[str, list[int]]:
        """The collectives called since ``start_sizing`` (any thread's): [calls, bytes] by kind, the
        bytes of each call's larger side (an all-gather's output, a reduce-scatter's input, a list's
        tensors together)."""
        with self.lock:
            sizes, self.sizes = self.sizes or {}, None
        return sizes

    def _sized(self, kind: str, args: Any, kwargs: Any) -> None:
        size = max((nbytes(v) for v in (*args, *kwargs.values())), default=0)
        with self.lock:
            if self.sizes is not None:
                entry = self.sizes.setdefault(kind, [0, 0])
                entry[0], entry[1] = entry[0] + 1, entry[1] + size

    # -- install ---------------------------------------------------------------------------------
    def install(self) -> None:
        dist = getattr(self.torch, "distributed", None)
        if dist is None or not dist.is_available():
            return
        for name in KINDS:
            original = getattr(dist, name, None)
            if original is not None and callable(original):
                self._originals[name] = original
                setattr(dist, name, self._timed(original))
        self.ddp.install()

    def uninstall(self) -> None:
        dist = getattr(self.torch, "distributed", None)
        for name, original in self._originals.items():
            if dist is not None:
                setattr(dist, name, original)
        self._originals = {}
        self.ddp.uninstall()

    # -- torch.distributed's functions -----------------------------------------------------------
    def _timed(self, original: Any) -> Any:
        comms = self
        compiling = getattr(getattr(self.torch, "compiler", None), "is_compiling", lambda: False)
        kind = KINDS.get(getattr(original, "__name__", ""), "")

        @functools.wraps(original)
        def timed(*args: Any, **kwargs: Any) -> Any:
            if compiling() or comms._coalescing(args, kwargs):
                return original(*args, **kwargs)
            if comms.sizes is not None and kind:
                comms._sized(kind, args, kwargs)
            if on_cuda(args, kwargs) and comms.to_nccl(args, kwargs):
                if not comms.timing:  # a step between timed ones: the call as the job made it
                    with comms.quiet():
                        return original(*args, **kwargs)
                return comms._nccl_call(original, args, kwargs)
            entered = time.monotonic()
            with comms.quiet():
                work = original(*args, **kwargs)
            if work is None:  # a call that waited (torch.distributed returns a work only where asked async)
                comms.took(entered, time.monotonic())
            else:
                comms.outstanding(Pending(entered, work, False))
            return work

        return hidden(timed)

    def _coalescing(self, args: Any, kwargs: Any) -> bool:
        """The call is inside ``_coalescing_manager`` on its group: it only queues a collective
        (an ``_IllegalWork`` where asked async, whose ``wait()`` raises), so it is the job's alone."""
        try:
            c10d = self.torch.distributed.distributed_c10d
            state = c10d._world.pg_coalesce_state
            if not state:
                return False
            return (group_of(args, kwargs) or c10d._get_default_group()) in state
        except Exception:  # noqa: BLE001 - a torch without it: no coalescing to leave alone
            return False

    def to_nccl(self, args: Any, kwargs: Any) -> bool:
        """The call's process group sends CUDA tensors to NCCL (its backend read once a group, the
        group held weakly: a group the job destroys goes, and a new one is read again)."""
        dist = self.torch.distributed
        group = group_of(args, kwargs) or getattr(getattr(dist, "group", None), "WORLD", None)
        try:
            known = self.nccl.get(group) if group is not None else None
        except TypeError:  # a group that cannot be held weakly: read each time
            known = None
        if known is None:
            try:
                known = "nccl" in str(dist.get_backend(group)).lower()
            except Exception:  # noqa: BLE001 - a group torch cannot name: timed by the host's clock
                known = False
            with contextlib.suppress(TypeError):
                if group is not None:
                    self.nccl[group] = known
        return known

    def _nccl_call(self, original: Any, args: Any, kwargs: Any) -> Any:
        """An NCCL collective, called as the job called it, from an event at its arrival to one at its end."""
        entered = time.monotonic()
        arrival = self.event(args, kwargs)
        with self.quiet():
            work = original(*args, **kwargs)
        if arrival is None:  # in a CUDA graph's capture: the job's alone
            return work
        self.on_nccl = True
        entry = Pending(entered, work, True, arrival, group=group_id(args, kwargs))
        if work is None:  # it waited: the calling stream waits for the collective
            entry.end = self.event(args, kwargs)
        else:
            self._end_event(entry, device_of(args, kwargs))
            if entry.end is not None:
                entry.work = None  # its end known: the work (and the tensors it holds) is the job's again
        self.outstanding(entry)
        return work

    def event(self, args: Any, kwargs: Any) -> Any:
        """An event recorded now on the calling stream of the collective's device (None: none may be,
        in a CUDA graph's capture)."""
        try:
            if self.torch.cuda.is_current_stream_capturing():
                return None
        except Exception:  # noqa: BLE001 - no CUDA to ask: no event
            return None
        return self._record(device_of(args, kwargs))

    def _record(self, device: Any) -> Any:
        """A timing event recorded now on the device's current stream (None: none could be)."""
        try:
            cuda = self.torch.cuda
            event = cuda.Event(enable_timing=True)
            event.record(cuda.current_stream(device))
            return event
        except Exception:  # noqa: BLE001 - no event: not timed
            return None

    def _end_event(self, entry: Pending, device: Any) -> None:
        """An asynchronous NCCL collective's end: an event its work's future's callback records on
        the stream torch runs the callback on, which waits for the collective's kernels (NCCL
        completes the future at once; the callback runs inline)."""

        def ended(_future: Any) -> None:
            entry.end = self._record(device)  # None: said untimed once the work completes

        try:
            entry.work.get_future().then(ended)
        except Exception:  # noqa: BLE001, S110 - a work without a future: said untimed once it completes
            pass

    def stream_pair(self, entered: float, arrival: Any, end: Any, group: int) -> None:
        """A CUDA collective timed by a pair of events on its calling stream, which waits for it."""
        self.on_nccl = True
        self.outstanding(Pending(entered, None, True, arrival, end, group))

    def outstanding(self, entry: Pending) -> None:
        """A collective called in the step under way: read once it completes."""
        entry.period = self.period
        if not entry.cuda:
            try:
                entry.work.get_future().then(functools.partial(_completed, entry))
            except Exception:  # noqa: BLE001 - a work without a future: completed when the step sees it
                pass
        with self.lock:
            self.open.append(entry)
            del self.open[:-MAX_OPEN]
            self.seen = True

    def took(self, entered: float, completed: float) -> None:
        """A collective that completed within its call (the host's clock: monotonic seconds)."""
        with self.lock:
            self.longest[self.period] = max(self.longest.get(self.period, 0.0), (completed - entered) * 1e3)
            self.seen = True

    # -- at each step ------------------------------------------------------------------------------
    def at_step(self) -> float | None:
        """A step ends: the longest a collective was outstanding from this rank's arrival, in ms.
        Without NCCL (gloo), the longest completed since the last step (0: none). With NCCL, a timed
        step's figure once every collective called in it has completed — at the step it ends, or a
        later one where the GPU is behind the host — and 0 for a timed step that called none; None
        for the steps between. None too where the process has run no collective."""
        timed, now = self.timing, time.monotonic()
        self.timing = now - self.timed_at >= self.every_s  # the next step's NCCL collectives timed?
        if self.timing:
            self.timed_at = now
        with self.lock:
            ended = self.period
            self.periods[ended], self.period = timed, ended + 1
            if len(self.periods) > MAX_OPEN:  # a collective that never completes holds them: the oldest go
                for period in sorted(self.periods)[:-MAX_OPEN]:
                    del self.periods[period]
            self._read()
            if not self.seen:
                self.periods.clear()
                self.longest.clear()
                return None
            if not self.on_nccl:  # every step: the longest completed since the last one, whichever called it
                ms = max(self.longest.values(), default=0.0)
                self.periods.clear()
                self.longest.clear()
                return ms
            return self._timed_figure()

    def _read(self) -> None:
        """The open collectives that completed, read into their steps' longest (the lock held)."""
        still: list[Pending] = []
        waiting: set[int] = set()  # groups with a CUDA collective not completed: the later ones wait
        for entry in self.open:
            ms = None if (entry.cuda and entry.group in waiting) else self._ms(entry)
            if ms is None:
                still.append(entry)
                if entry.cuda:
                    waiting.add(entry.group)
            elif ms >= 0.0:
                self.longest[entry.period] = max(self.longest.get(entry.period, 0.0), ms)
        self.open = still

    def _timed_figure(self) -> float | None:
        """The oldest timed step all of whose collectives have completed: its figure, once (the
        steps before it dropped); None where none is (the lock held)."""
        unread = {entry.period for entry in self.open}
        for period in sorted(self.periods):
            if period in unread:
                return None  # its collectives still run: it, and the steps after it, wait
            timed = self.periods.pop(period)
            longest = self.longest.pop(period, 0.0)
            if timed:
                return longest
        return None

    def _ms(self, entry: Pending) -> float | None:
        """A completed collective's time from the rank's arrival, ms (None: not completed yet; -1:
        completed, its time unknown — said, and left out of its step's figure)."""
        if not entry.cuda:
            return None if entry.completed is None else (entry.completed - entry.entered) * 1e3
        if entry.end is None:  # an asynchronous one whose callback has not run (or could not record)
            if entry.work is not None and not _completed_work(entry.work):
                return None
            self.untimed = self.untimed or NCCL_UNTIMED
            return -1.0
        if not _query(entry.end):
            return None
        try:
            return float(entry.arrival.elapsed_time(entry.end))
        except Exception:  # noqa: BLE001 - events that cannot be compared: completed, time unknown
            self.untimed = self.untimed or NCCL_UNTIMED
            return -1.0


def _completed(entry: Pending, future: Any) -> None:
    """A CPU collective's future completed (on the backend's thread)."""
    entry.completed = time.monotonic()


def _query(event: Any) -> bool:
    try:
        return bool(event.query())
    except Exception:  # noqa: BLE001 - an event that cannot say: read as done, its time unknown
        return True


def _completed_work(work: Any) -> bool:
    try:
        return bool(work.is_completed())
    except Exception:  # noqa: BLE001 - a work that cannot say: read as completed
        return True
