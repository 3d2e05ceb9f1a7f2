"""Dying with a parent: a thread that acts the moment this process's parent has exited.

Every process gpudash starts must end with the process that started it, even when that one is
SIGKILLed and whatever the started process is doing (a step blocked in a loader, a collective, a
sleep): the workload process with gpudash, each data-parallel rank with the launcher, a
``gpudash serve`` tab's dashboard with the server. ``on_parent_exit`` starts a daemon thread
that blocks on the parent's end and then runs an action (end a process group, quit), so nothing
waits for a step to finish; ``die_with_parent`` is that action for the workload process and each
rank: remove the run's scratch directory and kill the workload's process group.

How the end is seen: on Linux ≥ 5.3 a pidfd of the parent (``os.pidfd_open``), which becomes
readable when it exits: no delay, no polling. Elsewhere (another OS, an older kernel, a sandbox
that forbids pidfd_open) the thread checks ``os.getppid()`` every ``POLL_S`` instead (a dead
parent's children are handed to another process); it says so once on stderr, and ``method``
names it. Not PR_SET_PDEATHSIG: that signal comes when the *thread* that forked the child ends,
and the dashboard may start its workload from a worker thread.

The action runs in the watcher thread, so it needs the GIL: a step that keeps the GIL (one long C
call that does not release it, which torch's operators, loaders and collectives do) delays it.
Torch-free.
"""

from __future__ import annotations

import functools
import multiprocessing
import os
import select
import shutil
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from gpudash.core import procgroup

POLL_S = 0.25  # without a pidfd: how often the parent is checked
PIDFD = "pidfd"


@dataclass(frozen=True)
class ParentWatch:
    """A started watch: whose end it waits for, how (``PIDFD`` or a polling line), its thread."""

    parent: int
    method: str
    thread: threading.Thread


def on_parent_exit(parent: int, action: Callable[[], object], *, name: str = "gpudash-parent-watch") -> ParentWatch:
    """Run ``action`` in a daemon thread as soon as ``parent`` (this process's parent) has exited,
    at once when it already has (this process's parent is no longer ``parent``)."""
    fd, method = _open_pidfd(parent)
    thread = threading.Thread(target=_watch, args=(parent, fd, action), name=name, daemon=True)
    thread.start()
    return ParentWatch(parent=parent, method=method, thread=thread)


def parent_pid() -> int:
    """The process that started this one through multiprocessing (else the current parent)."""
    parent = multiprocessing.parent_process()
    return parent.pid if parent is not None and parent.pid is not None else os.getppid()


def die_with_parent(group: int, scratch: str | None) -> ParentWatch:
    """Once this process's parent is gone (gpudash, for the workload process; the launcher, for a
    rank), remove ``scratch`` and kill the workload's process group ``group`` at once, this
    process included (``procgroup.kill_group_now``)."""
    cleanup = functools.partial(shutil.rmtree, scratch, ignore_errors=True) if scratch else None
    return on_parent_exit(
        parent_pid(), functools.partial(procgroup.kill_group_now, group, cleanup), name="gpudash-die-with-parent"
    )


def _open_pidfd(parent: int) -> tuple[int | None, str]:
    """A pidfd of ``parent`` (None when it is gone already or pidfds are unavailable) and the method."""
    polling = f"checking the parent pid every {POLL_S:g} s"
    pidfd_open = getattr(os, "pidfd_open", None)
    if pidfd_open is None:
        _say(f"os.pidfd_open is not available here (Linux ≥ 5.3, Python ≥ 3.9): {polling} instead")
        return None, polling
    try:
        fd = pidfd_open(parent)
    except ProcessLookupError:
        return None, PIDFD  # gone already: _watch sees getppid() differ and acts at once
    except OSError as exc:  # ENOSYS (old kernel), EPERM (a sandbox)
        _say(f"pidfd_open failed ({exc.strerror or exc}): {polling} instead")
        return None, polling
    return fd, PIDFD


def _watch(parent: int, fd: int | None, action: Callable[[], object]) -> None:
    """Wait for the parent's end, then run ``action``.

    The pidfd was opened before ``getppid()`` is read here: while that still says ``parent``, the
    parent was alive after the pidfd was made, so the pidfd is the parent's (not a process that
    got its pid after it died)."""
    try:
        if os.getppid() == parent:
            if fd is not None:
                poller = select.poll()
                poller.register(fd, select.POLLIN)
                while not poller.poll():  # blocks (without the GIL) until the parent exits
                    pass
            else:
                while os.getppid() == parent:
                    time.sleep(POLL_S)
    finally:
        if fd is not None:
            os.close(fd)
    action()


def _say(text: str) -> None:
    print(f"gpudash: {text}", file=sys.stderr, flush=True)
