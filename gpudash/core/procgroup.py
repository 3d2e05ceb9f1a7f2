"""The workload process's group: who is still in it, and ending all of it.

The workload process makes itself a process group (``gpudash.engine.child``), so its group id is
its pid; everything it starts (DataLoader workers, the resource tracker) inherits the group
and outlives it unless told to go. ``end_group`` is what the runner does on every exit path;
``kill_group_now`` is what a member does when gpudash is gone (``gpudash.core.parent_watch``).

Membership is read through ``gpudash.core.proctree`` (psutil): a process whose group is the
workload's pid is in the group it made, since a group id is not reused while the group has
members, so a group found empty is never signalled (no stray signal to a reused pid). Zombies
(dead, waiting for a parent to reap them) do not count.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterator
from typing import NoReturn

from gpudash.core import proctree

GRACE_S = 1.0  # after SIGTERM, then after SIGKILL: how long the members get to be gone
POLL_S = 0.02


def members(pgid: int) -> list[int]:
    """The live processes of group ``pgid``."""
    return proctree.group_members(pgid)


def signal_group(pgid: int, sig: int) -> bool:
    """Send ``sig`` to the group when it has live members; True when it had. Never to
    gpudash's own group (nor to group 0 or 1)."""
    if pgid <= 1 or pgid == os.getpgrp() or not members(pgid):
        return False
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def wait_empty(pgid: int, timeout: float) -> bool:
    """Wait up to ``timeout`` s for the group to have no live members; True when it has none."""
    deadline = time.monotonic() + timeout
    while members(pgid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL_S)
    return True


def end_group(pgid: int, grace_s: float = GRACE_S) -> list[int]:
    """SIGTERM the group, SIGKILL what is left after ``grace_s``, wait ``grace_s`` more;
    returns the pids still there (none, unless a process is stuck in the kernel)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if not signal_group(pgid, sig) or wait_empty(pgid, grace_s):
            return []
    return members(pgid)


def kill_group_now(pgid: int, cleanup: Callable[[], object] | None = None) -> NoReturn:
    """From a member of group ``pgid``: run ``cleanup`` (remove the run's temp files), then SIGKILL
    the whole group at once, this process included.

    Cleanup comes first: once a member dies, the workload's main thread may fail on it and exit
    the process, taking this thread with it. No grace period: gpudash is gone and nobody reads
    what the group would say. ``pgid`` is the group the workload process made (its pid); when
    this process is not in it (the workload could not make its group), this process alone is
    killed, never a group it did not make."""
    try:
        if cleanup is not None:
            cleanup()
    finally:
        if pgid > 1 and os.getpgrp() == pgid:
            os.killpg(pgid, signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)
    raise AssertionError("unreachable: SIGKILL")  # pragma: no cover


def signal_name(returncode: int | None) -> str:
    """The signal a process died of (``SIGKILL``), from its return code as Python gives it (-N);
    "" when it exited by itself or still runs."""
    if returncode is None or returncode >= 0:
        return ""
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


@contextlib.contextmanager
def ctrl_c_held() -> Iterator[None]:
    """SIGINT held back (blocked) in this thread while a workload process is started from it: the
    child inherits the blocked signal through fork and exec, so a terminal's Ctrl-C — which reaches
    the whole foreground group — cannot kill its interpreter while it starts (it ignores SIGINT
    once it runs), and the parent gets its own Ctrl-C as soon as the start is over: held, not lost."""
    held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
