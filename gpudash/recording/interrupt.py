"""A Ctrl-C, SIGTERM or SIGHUP as a flag a loop checks: ``Interrupted``.

Every headless command that runs a workload (``gpudash record``, a job's recording, ``sweep``,
``tune``) holds one around its loop: the first signal asks the workload to stop (a user's job: a
Ctrl-C is passed on to it, which it takes as it would bare) and lets the files close intact; a
second Ctrl-C stops waiting for the child (``KeyboardInterrupt``).
Torch- and Textual-free.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

from gpudash.core.protocol import ExitCode

STOP_TIMEOUT_S = 10.0  # how long the child may take to stop itself


PASSED_ON = (  # a user's job: the Ctrl-C is the user's, passed on at once, as bare
    "Ctrl-C: passed on to the job, which is interrupted as it would be bare; gpudash keeps what it "
    "recorded and ends with the job (Ctrl-C again to force)"
)


class Interrupted:
    """SIGINT/SIGTERM/SIGHUP → a flag the record loop checks (the CSV stays intact). ``job``: a
    user's job's recording, where a Ctrl-C is passed on to the job at once (``gpudash.job.run``)
    rather than a stop after the current step."""

    def __init__(self, job: bool = False) -> None:
        self.job = job
        self.signal: int | None = None
        self.forced = False  # a second Ctrl-C came: terminate the child now
        self._old: dict[int, Any] = {}

    def __enter__(self) -> Interrupted:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # SIGHUP: the terminal closed
            try:
                self._old[sig] = signal.signal(sig, self._handle)
            except ValueError:  # not the main thread
                pass
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        if self.signal is None:
            self.signal = signum
            if signum == signal.SIGINT and self.job:
                _announce(PASSED_ON)
            elif signum == signal.SIGINT:
                _announce("stopping after the current step (Ctrl-C again to force)")
            else:
                _announce(f"{signal.Signals(signum).name}: stopping after the current step")
        elif signum == signal.SIGINT and not self.forced:
            self.forced = True
            _announce("forced: terminating the workload now")
            raise KeyboardInterrupt  # a second Ctrl-C: stop waiting for the child
        # later signals: the child is already being terminated, and the CSV closes after it

    def __exit__(self, *exc: object) -> None:
        for sig, old in self._old.items():
            # once interrupted, gpudash is on its way out with 130: a later Ctrl-C (an impatient
            # third) must not kill it by SIGINT between the closed CSV and its last line
            late = sig == signal.SIGINT and self.signal is not None
            signal.signal(sig, signal.SIG_IGN if late else old)

    def outcome(self) -> tuple[str, ExitCode] | None:
        """(status, exit code) once a signal came; None before."""
        if self.signal is None:
            return None
        return f"interrupted by {signal.Signals(self.signal).name}", ExitCode.INTERRUPTED

    @property
    def stop_timeout(self) -> float:
        """How long to wait for the child to stop: not at all after a second Ctrl-C."""
        return 0 if self.forced else STOP_TIMEOUT_S


def _announce(text: str) -> None:
    """A line on stderr from a signal handler, at once: one ``os.write`` (``print`` could be in
    the middle of writing to the same buffered stream); a closed terminal (SIGHUP) is ignored."""
    try:
        os.write(sys.stderr.fileno(), f"gpudash: {text}\n".encode())
    except (OSError, ValueError):
        pass
