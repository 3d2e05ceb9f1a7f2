"""Every runner with a live workload process, so that gpudash's exit stops them all.

A runner dropped without ``stop()`` (its owner died in an exception) must still stop its child at
exit, or multiprocessing's own exit handler would wait forever on the non-daemon child: runners
are held here strongly from their child's start (``track``) to its stop (``untrack``). At exit
(atexit), and on SIGTERM and SIGHUP where nothing else handles them, each is stopped (its group
too, empty logs removed) before gpudash goes. Torch-free.
"""

from __future__ import annotations

import atexit
import os
import signal
import threading
from typing import Protocol

AT_EXIT_STOP_S = 3.0  # how long each child gets to stop itself at gpudash's exit


class Runner(Protocol):
    """What is asked of a runner here (``gpudash.host.runner.WorkloadRunner``)."""

    def stop(self, timeout: float = ...) -> None: ...


LIVE: set[Runner] = set()
_registered = False


def track(runner: Runner) -> None:
    """``runner`` has a child now: stop it at exit. Registered once, after multiprocessing.util has
    registered its handler: atexit runs handlers last-in first-out, so ours stops the children
    before it joins them."""
    global _registered
    LIVE.add(runner)
    if not _registered:
        _registered = True
        atexit.register(stop_all, AT_EXIT_STOP_S)


def untrack(runner: Runner) -> None:
    """``runner``'s child is stopped."""
    LIVE.discard(runner)


def stop_all(timeout: float) -> None:
    """Stop every runner's child (``timeout`` as in ``WorkloadRunner.stop``); errors are ignored:
    the caller is exiting."""
    for runner in list(LIVE):
        try:
            runner.stop(timeout=timeout)
        except Exception:  # noqa: BLE001 - exiting anyway
            pass


def stop_children_on(*signals: int) -> None:
    """For each signal that would end gpudash at once (its default action: no exit handlers,
    the child and its workers left behind), stop the children first. A signal someone already
    handles (``--record`` handles SIGTERM and SIGHUP) is left alone; only the main thread can
    set handlers."""
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in signals:
        if signal.getsignal(sig) == signal.SIG_DFL:
            signal.signal(sig, stop_children_then_die)


def stop_children_then_die(signum: int, frame: object) -> None:
    """Stop every child (and its group, removing empty logs), then die of the signal as before.

    Done here, not by raising SystemExit: that would unwind through whatever the main thread
    runs (Textual's event loop) and leave it half torn down."""
    signal.signal(signum, signal.SIG_DFL)  # a second one ends gpudash at once
    stop_all(AT_EXIT_STOP_S)
    os.kill(os.getpid(), signum)
