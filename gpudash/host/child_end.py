"""How one workload process ended, told once (``ChildEnd``): the child's own last word, or the
parent's when it died without one; its log named where it holds the why.

A stop that had to terminate the child (it did not stop itself in time) is a stop, not a crash:
whatever the child says after gpudash's SIGTERM ("got signal 15") is reported as "stopped". The
child's resident memory is sampled while it runs, so that a SIGKILL at high RSS is reported as
probably out of memory. Torch-free.
"""

from __future__ import annotations

import dataclasses
import os
import time

from gpudash.core import memguard
from gpudash.core.protocol import ENDING_KINDS, Event, EventKind
from gpudash.host.exit_reasons import exit_reason, last_log_line
from workloads.limits import machine_ram, rss_bytes

UNRESPONSIVE_STOP_S = 1.0  # how long a child reported not responding gets to stop itself
RSS_EVERY_S = 0.5  # how often the child's resident memory is sampled
INFORMATIVE = ("error", "exception", "fault", "abort", "killed", "terminate", "out of memory")  # a log line's why


class ChildEnd:
    """The end of the current workload process: whether it said so itself (``final_seen``), crashed,
    was being stopped (and terminated, how long into the stop), and whether its end was reported.
    ``log_path`` is its log; ``own_log``: gpudash chose it, and removes it after a clean stop."""

    def __init__(self, log_path: str, own_log: bool) -> None:
        self.log_path = log_path
        self.own_log = own_log
        self.rss: int | None = None  # the child's resident memory when last sampled
        self.next_rss = 0.0
        self.begin()

    def begin(self) -> None:
        """A new child: nothing of its end known yet; its lines of the log start here (the log appends)."""
        self.final_seen = False  # a "stopped" or "crashed" event came from the child
        self.crashed = False  # a "crashed" event came from the child or was reported for it
        self.reported = False  # the child's end has been reported
        self.stopping = False
        self.stop_began: float | None = None  # when the stop began (monotonic)
        self.terminated_after: float | None = None  # seconds into the stop when gpudash sent SIGTERM
        try:
            self.log_start = os.path.getsize(self.log_path)
        except OSError:
            self.log_start = 0

    def stop_asked(self) -> None:
        """gpudash began stopping a child that had not ended (not when it already died: a crash)."""
        if not self.stopping:
            self.stopping = True
            self.stop_began = time.monotonic()

    def terminating(self) -> None:
        """gpudash sends SIGTERM: the stop's time so far is what the "stopped" event says."""
        if self.terminated_after is None and self.stop_began is not None:
            self.terminated_after = time.monotonic() - self.stop_began

    def told(self, event: Event) -> Event:
        """An event of the child's as reported: its own "stopped" or "crashed" marks its end (a crash
        after gpudash's SIGTERM a stop; a crash names the log)."""
        if event.kind not in ENDING_KINDS:
            return event
        self.final_seen = True
        if event.kind == EventKind.CRASHED and self.terminated_after is not None:
            return self.terminated_event(event.time_s, reported=event.message)  # our SIGTERM, not a crash
        if event.kind == EventKind.CRASHED:
            self.crashed = True
            return dataclasses.replace(event, message=self.with_log(event.message))
        return event

    def end_events(self, exitcode: int | None, time_s: float) -> list[Event]:
        """The child has exited: its end, told once (nothing more when it said so itself)."""
        self.reported = True
        if self.final_seen:
            return []
        if self.stopping and self.terminated_after is not None:
            return [self.terminated_event(time_s, exited=f"workload process {exit_reason(exitcode)}")]
        if self.stopping:
            message = f"workload process {exit_reason(exitcode)} while stopping"
            return [Event(time_s=time_s, kind=EventKind.STOPPED, message=message)]
        message = f"workload process {exit_reason(exitcode)}{memguard.killed_note(exitcode, self.rss, machine_ram())}"
        line = last_log_line(self.log_path, start=self.log_start)
        if line and any(word in line.lower() for word in INFORMATIVE):
            message += f": {line}"
        self.crashed = True
        return [Event(time_s=time_s, kind=EventKind.CRASHED, message=self.with_log(message))]

    def terminated_event(self, time_s: float, *, reported: str = "", exited: str = "") -> Event:
        """The "stopped" event of a child gpudash terminated while stopping it: what it
        ``reported`` then (its "crash": the signal) goes to the details; how it ``exited``, when
        it said nothing, to the message."""
        after = self.terminated_after or 0.0
        message = f"workload terminated after {after:.1f} s of stopping"
        if after >= UNRESPONSIVE_STOP_S:
            message += ": it did not stop by itself in that time"
        if exited:
            message += f" ({exited})"
        details = {"terminated_after_s": f"{after:.1f}"}
        if reported:
            details["reported"] = reported
        return Event(time_s=time_s, kind=EventKind.STOPPED, message=message, details=details)

    def watch_memory(self, pid: int | None) -> None:
        """Sample the child's resident memory every RSS_EVERY_S (what a SIGKILL's report says)."""
        now = time.monotonic()
        if pid is None or now < self.next_rss:
            return
        self.next_rss = now + RSS_EVERY_S
        rss = rss_bytes(pid)
        if rss is not None:
            self.rss = rss

    def ended_badly(self) -> bool:
        """The child crashed (or died without saying why, not while being stopped)."""
        if self.crashed:
            return True
        return not self.final_seen and not self.stopping

    def log_empty(self) -> bool:
        try:
            return os.path.getsize(self.log_path) == 0
        except OSError:
            return True

    def with_log(self, message: str) -> str:
        return f"{message} (log: {self.log_path})" if self.own_log and not self.log_empty() else message

    def remove_log(self, exitcode: int | None) -> None:
        """A log chosen here goes once the child has exited, when it is empty or the child did not crash."""
        if self.own_log and exitcode is not None and (not self.ended_badly() or self.log_empty()):
            try:
                os.unlink(self.log_path)
            except OSError:
                pass
