"""The workload process's ends of the two queues to the parent (``gpudash.host.runner``): controls in,
events and samples out, without ever making training wait. Used by the single-process child
(``gpudash.engine.child``) and by rank 0 of a data-parallel run (``gpudash.engine.ranks``). A dead parent is
not looked for here, between steps: those processes die with it (``gpudash.core.parent_watch``)."""

from __future__ import annotations

import time
from collections import deque
from typing import Any

from gpudash.core.protocol import SAMPLES_DROPPED, Control, Event, EventKind, Message, Sample, SyncSites

MAX_EVENT_BACKLOG = 1000  # events held while the parent does not read; the oldest go beyond this
FLUSH_AT_EXIT_S = 10.0  # how long an exiting child waits for the parent to take its last events


class ParentChannel:
    """The workload process's ends of the two queues (controls from the parent, messages to it).

    Training never waits for the parent: while the output queue is full, samples are dropped
    (and counted: an "error" event with what="samples" says how many once the parent reads
    again) and events wait in order in a bounded backlog, sent before anything newer. The latest
    dropped sample follows that report: steps are cumulative, so the totals stay right even when
    the run ends before the parent reads again.
    """

    def __init__(self, controls: Any, out: Any, t0: float | None = None) -> None:
        import threading

        self._controls = controls
        self._out = out
        self._t0 = time.monotonic() if t0 is None else t0
        self.parent_gone = False
        self._lock = threading.Lock()  # progress reports emit from a helper thread
        self._backlog: deque[Message] = deque()  # events not yet sent, oldest first
        self.dropped_samples = 0  # since the last report
        self.dropped_events = 0  # backlog overflow, since the last report
        self._dropping_since: float | None = None
        self._latest_dropped: Sample | None = None  # sent after the drop report: the totals

    def emit(self, msg: Message) -> None:
        """Send a message now if the queue has room; else drop it (a sample) or keep it (an event)."""
        with self._lock:
            if not self._send_backlog():
                self._hold(msg)
            elif not self._put(msg):
                self._hold(msg)

    def _hold(self, msg: Message) -> None:
        """Keep an event for later; count a dropped sample."""
        if self._dropping_since is None:
            self._dropping_since = time.monotonic()
        if isinstance(msg, Sample):
            self.dropped_samples += 1
            self._latest_dropped = msg
            return
        if isinstance(msg, SyncSites):
            return  # a cumulative table: the next one says all this one did
        if len(self._backlog) >= MAX_EVENT_BACKLOG:
            self._backlog.popleft()
            self.dropped_events += 1
        self._backlog.append(msg)

    def _put(self, msg: Message) -> bool:
        import queue

        try:
            self._out.put_nowait(msg)
        except queue.Full:
            return False
        return True

    def _send_backlog(self) -> bool:
        """Send the held events, then the drop report; True when nothing is left waiting."""
        while self._backlog:
            if not self._put(self._backlog[0]):
                return False
            self._backlog.popleft()
        if self._dropping_since is None:
            return True
        report = self._drop_report()
        if report is not None and not self._put(report):
            return False
        self.dropped_samples = self.dropped_events = 0
        self._dropping_since = None
        latest, self._latest_dropped = self._latest_dropped, None
        if latest is None:
            return True
        self._backlog.append(latest)  # after the report, before anything newer
        return self._send_backlog()

    def _drop_report(self) -> Event | None:
        """What was dropped since the queue filled up, as one event (None: nothing was)."""
        samples = self.dropped_samples - (1 if self._latest_dropped is not None else 0)  # the latest goes on
        if not (samples or self.dropped_events):
            return None
        assert self._dropping_since is not None
        behind = time.monotonic() - self._dropping_since
        lost = f"{samples} sample{'s' if samples != 1 else ''} dropped"
        if self.dropped_events:
            lost += f" and {self.dropped_events} event{'s' if self.dropped_events != 1 else ''} lost"
        message = (
            f"{lost} over {behind:.1f} s: gpudash read the workload's messages too slowly "
            "(steps and samples are cumulative, so the totals stay right)"
        )
        details = {
            "dropped_samples": str(samples),
            "dropped_events": str(self.dropped_events),
            "behind_s": f"{behind:.3f}",
        }
        return Event(
            time_s=time.monotonic() - self._t0,
            kind=EventKind.ERROR,
            what=SAMPLES_DROPPED,
            message=message,
            details=details,
        )

    def flush(self, timeout: float) -> None:
        """Wait up to ``timeout`` s (while the parent lives) for held events to be sent."""
        import multiprocessing

        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                if self._send_backlog():
                    return
            parent = multiprocessing.parent_process()
            if parent is not None and not parent.is_alive():
                self.parent_gone = True  # nobody will read: close without waiting for the pipe
                return
            if time.monotonic() >= deadline:
                return
            time.sleep(0.02)

    def next_control(self, timeout: float) -> Control | None:
        """The next control, waiting up to ``timeout`` s (None: none came)."""
        import queue

        try:
            if timeout <= 0:
                return self._controls.get_nowait()
            return self._controls.get(timeout=timeout)
        except queue.Empty:
            return None

    def close(self) -> None:
        """Send what is held, close the output queue and wait until its last message is in the
        pipe (not when the parent is gone): the process may end at once afterwards."""
        if not self.parent_gone:
            self.flush(FLUSH_AT_EXIT_S)
        if self.parent_gone:
            self._out.cancel_join_thread()
        self._out.close()
        self._out.join_thread()
