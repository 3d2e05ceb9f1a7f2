"""The workload process's group: who is still in it, and ending all of it.

The workload process makes itself a process group (``gpudash.engine.child``), so its group id is
its pid; everything it starts (DataLoader workers, the resource tracker) inherits the group
and outlives it unless told to go. ``end_group`` is what the runner does on every exit path;
``kill_group_now`` is what a member does when gpudash is gone (``gpudash.core.parent_watch``).

Membership is read from ``/proc`` (Linux): a process whose group is the workload's pid is in
the group it made, since a group id is not reused while the group has members, so a group
found empty is never signalled (no stray signal to a reused pid). Zombies (dead, waiting for
a parent to reap them) do not count. Without ``/proc`` nothing is found and nothing is sent.
``parent_of`` reads the same ``/proc/PID/stat`` for a process's parent (the tests and
``benchmarks/rank_host_cost.py`` find a launcher's ranks with it).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from typing import NoReturn

GRACE_S = 1.0  # after SIGTERM, then after SIGKILL: how long the members get to be gone
POLL_S = 0.02


def _stat_fields(pid: int | str) -> list[bytes] | None:
    """The fields of ``/proc/PID/stat`` after the command name (state, ppid, pgrp, ...); None when
    the process is gone or there is no ``/proc``."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    # pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses, so split after the last ")"
    return stat.rsplit(b")", 1)[-1].split()


def parent_of(pid: int) -> int | None:
    """The parent pid of ``pid`` (from ``/proc``); None when it is gone."""
    fields = _stat_fields(pid)
    try:
        return int(fields[1]) if fields else None
    except (IndexError, ValueError):
        return None


def proc_pids() -> list[int] | None:
    """The processes ``/proc`` lists now (some may be gone by the time they are read); None
    without ``/proc``."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return None
    return [int(name) for name in names if name.isdigit()]


def members(pgid: int) -> list[int]:
    """The live processes of group ``pgid``."""
    found: list[int] = []
    for pid in proc_pids() or ():
        fields = _stat_fields(pid)
        if fields is None:
            continue  # gone meanwhile
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            found.append(pid)
    return found


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
