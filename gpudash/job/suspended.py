"""A job that stops and goes on: Ctrl-Z, a job stopped by its terminal, ``kill -STOP``.

``JobStops.check`` (each poll of the session) hands the terminal to the job when gpudash is the
terminal's foreground (``gpudash.job.terminal``), and reads what became of the job's first
process: stopped by Ctrl-Z while it held the terminal, gpudash suspends itself with it (the shell
sees its job stopped; ``fg`` goes on); stopped by the terminal before it was handed over (a race at
its start), it is continued; stopped otherwise (SIGTTOU in the background, ``kill -STOP``), the
dashboard and the recording say so at once, and while it is stopped its time is the ``suspended``
phase — no zero throughput, no stall — until it goes on. Torch-free.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from typing import Any

from gpudash.core.protocol import SUSPENDED
from gpudash.job.launch import JobProcess
from gpudash.job.phase_watch import PhaseWatch
from gpudash.job.terminal import TTY_SIGNALS, resume_job, signal_groups, stop_state, suspend_with_job

FRONT_EVERY_S = 0.5  # how often gpudash looks whether it holds the terminal's foreground (fg after bg)


def _name(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


class JobControlSignals:
    """Headless, while the job runs: SIGTSTP to gpudash (``kill -TSTP``, Ctrl-Z where the job does
    not hold the terminal) suspends the job with it; SIGCONT of gpudash continues the job."""

    def __init__(self, stops: JobStops) -> None:
        self.stops = stops
        self._old: dict[int, Any] = {}

    def __enter__(self) -> JobControlSignals:
        handlers = {signal.SIGTSTP: lambda *_: self.stops.suspend(), signal.SIGCONT: lambda *_: self.stops.resume()}
        for sig, handler in handlers.items():
            try:
                self._old[sig] = signal.signal(sig, handler)
            except ValueError:  # not the main thread
                pass
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)


class JobStops:
    """The stops of the job of ``process``: ``check(now)`` each poll, ``suspend()`` on gpudash's own SIGTSTP."""

    def __init__(self, process: JobProcess, watch: PhaseWatch, say: Callable[[str], None]) -> None:
        self.process = process
        self.watch = watch
        self.say = say  # an "error" event of the job's: seen at once
        self.stopped_by: int | None = None  # the signal the job is stopped by now
        self.gpudash_was_stopped = False  # gpudash itself was stopped and went on (SIGCONT) since the last look
        self._front_checked = 0.0

    @property
    def groups(self) -> list[int]:
        pid = self.process.pid
        return [] if pid is None else [pid, *self.process.groups]

    def check(self, now: float) -> None:
        pid, terminal = self.process.pid, self.process.terminal
        if pid is None or self.process.poll() is not None:
            return
        if terminal.fd is not None and now - self._front_checked >= FRONT_EVERY_S:
            self._front_checked = now
            if not terminal.job_in_front and terminal.hand_over(pid) and self.stopped_by in TTY_SIGNALS:
                signal_groups(self.groups, signal.SIGCONT)  # gpudash came to the front (fg): the job goes on
        change = stop_state(pid)
        if change is None:
            return
        what, sig = change
        if what == "continued":
            self._went_on(now)
        elif sig == signal.SIGTSTP and terminal.job_in_front:
            self.suspend()  # Ctrl-Z: gpudash stops with its job
        elif sig in TTY_SIGNALS and terminal.job_in_front:
            signal_groups(self.groups, signal.SIGCONT)  # it touched the terminal just before it was handed over
        else:
            self._stopped(now, sig)

    def suspend(self) -> None:
        """gpudash and its job stop together (Ctrl-Z, or a SIGTSTP sent to gpudash), and go on together."""
        if self.process.pid is None or self.process.poll() is not None:
            return
        since = time.monotonic()
        self.watch.suspended(since, "suspended with gpudash (Ctrl-Z)")
        suspend_with_job(self.process.terminal, self.groups)
        while stop_state(self.process.pid) is not None:
            pass  # the job's own stop and continue, which gpudash made
        self.stopped_by = None
        self.gpudash_was_stopped = True
        self.watch.resumed(time.monotonic(), since)

    def resume(self) -> None:
        """gpudash was continued by a signal of its own (SIGCONT after ``kill -STOP`` of gpudash):
        the job goes on with it."""
        self.gpudash_was_stopped = True
        if self.process.pid is not None and self.process.poll() is None:
            resume_job(self.process.terminal, self.groups)

    def _stopped(self, now: float, sig: int) -> None:
        self.stopped_by = sig
        if sig in TTY_SIGNALS:
            why = (
                f"the job is stopped by {_name(sig)}: it used the terminal while gpudash runs in the background "
                "(as it would bare); bring gpudash to the front (fg) and it goes on"
            )
        else:
            how = f"kill -CONT {self.process.pid}"
            why = f"the job is stopped by {_name(sig)}, not by gpudash: it goes on when continued ({how})"
        self.say(why)
        self.watch.suspended(now, why)

    def _went_on(self, now: float) -> None:
        if self.stopped_by is None:
            return
        self.stopped_by = None
        since = self.watch.phases.open.get(SUSPENDED)
        if since is not None:
            self.watch.resumed(now, since)
