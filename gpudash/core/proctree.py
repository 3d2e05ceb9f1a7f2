"""The machine's processes, read through psutil: the one place gpudash looks at other processes.

Who is in a process group or a session (the workload's group, a ``gpudash serve`` tab's
session), a process's parent, children and descendants (a launcher's ranks, with their CPU
seconds and own memory for ``tune``'s reading of DataLoader workers), the memory the machine has
free, a process's owner and command line (``gpudash watch``'s process table), and the threads a
user runs (``RLIMIT_NPROC``'s count). A process that ends while it is read is left out, never an
error; zombies (dead, waiting for a parent to reap them) never count as live. Where psutil cannot
read a process (another pid namespace, no permission) the answer is ``None`` or the process is
skipped. Torch-free.
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Callable
from dataclasses import dataclass

import psutil

_GONE = (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied, ProcessLookupError, PermissionError)
_DEAD = (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD)


def _live_where(test: Callable[[int], bool]) -> list[int]:
    """The live processes whose pid passes ``test`` (one that ends while it is read is left out)."""
    found = []
    for pid in psutil.pids():
        try:
            if test(pid) and alive(pid):
                found.append(pid)
        except (*_GONE, OSError):
            continue
    return found


def group_members(pgid: int) -> list[int]:
    """The live processes of process group ``pgid``."""
    return _live_where(lambda pid: os.getpgid(pid) == pgid)


def session_members(sid: int) -> list[int]:
    """The live processes of session ``sid``."""
    return _live_where(lambda pid: os.getsid(pid) == sid)


def parent_of(pid: int) -> int | None:
    """The parent pid of ``pid``; None when it is gone (or was never there)."""
    try:
        return psutil.Process(pid).ppid()
    except (*_GONE, ValueError):
        return None


def children(pid: int, *, recursive: bool = False) -> list[int]:
    """The live processes ``pid`` started (``recursive``: theirs too, every level); [] when it is gone."""
    try:
        kids = psutil.Process(pid).children(recursive=recursive)
    except (*_GONE, ValueError):
        return []
    return sorted(kid.pid for kid in kids if alive(kid.pid))


@dataclass(frozen=True)
class Usage:
    """One process under a root, read once: its parent, command line, CPU seconds and start."""

    pid: int
    parent: int
    command: str
    cpu_s: float
    born: float


def usage_under(root: int) -> list[Usage]:
    """Every live process under ``root`` (all levels) with its CPU seconds so far; [] when it is gone."""
    try:
        tree = psutil.Process(root).children(recursive=True)
    except (*_GONE, ValueError):
        return []
    found = []
    for process in tree:
        try:
            cpu = process.cpu_times()
            found.append(
                Usage(
                    process.pid,
                    process.ppid(),
                    " ".join(process.cmdline()),
                    cpu.user + cpu.system,
                    process.create_time(),
                )
            )
        except _GONE:
            continue  # gone meanwhile
    return found


def workers_under(root: int) -> list[Usage]:
    """The DataLoader workers of a job under ``root`` (``gpudash record``'s process): a process whose
    command line is its parent's (a fork) or names ``multiprocessing`` (spawn, forkserver), whose
    parent is not ``root`` itself (the job, or its launcher)."""
    tree = usage_under(root)
    lines = {u.pid: (u.parent, u.command) for u in tree}

    def is_worker(u: Usage) -> bool:
        if u.parent == root or u.parent not in lines:
            return False
        return u.command == lines[u.parent][1] or "multiprocessing" in u.command

    return [u for u in tree if is_worker(u)]


def own_memory(pid: int) -> int | None:
    """The bytes ``pid`` holds that no other process shares (USS: what one more such process would
    add), or its resident set (RSS) where the private count cannot be read; None when it is gone.
    A forked DataLoader worker's RSS counts every page it still shares with its parent."""
    try:
        process = psutil.Process(pid)
        try:
            return int(process.memory_full_info().uss)
        except (psutil.AccessDenied, AttributeError, OSError):
            return int(process.memory_info().rss)
    except (*_GONE, ValueError, OSError):
        return None


def memory_available() -> int:
    """The bytes the machine can give new processes without swapping (``MemAvailable``)."""
    return int(psutil.virtual_memory().available)


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not)."""
    try:
        return psutil.Process(pid).status() not in _DEAD
    except (*_GONE, ValueError):
        return False


def owner(pid: int) -> str | None:
    """The user ``pid`` runs as, by name (its uid where the name is not known); None when it
    cannot be read here."""
    try:
        uid = psutil.Process(pid).uids().effective
    except (*_GONE, ValueError):
        return None
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def command_line(pid: int) -> str | None:
    """``pid``'s command line, its arguments joined by spaces; a kernel thread's or a zombie's
    (which have none): its name. None when it cannot be read here."""
    try:
        process = psutil.Process(pid)
        try:
            args = process.cmdline()
        except psutil.ZombieProcess:
            args = []
        return " ".join(args) if any(args) else process.name()
    except (*_GONE, ValueError):
        return None


def user_threads(uid: int) -> int | None:
    """The threads of the processes user ``uid`` runs (each counts against ``RLIMIT_NPROC``);
    None when the process list cannot be read."""
    try:
        processes = list(psutil.process_iter())
    except OSError:
        return None
    count = 0
    for process in processes:
        try:
            if process.uids().real == uid:
                count += process.num_threads()
        except _GONE:
            continue  # gone meanwhile
    return count
