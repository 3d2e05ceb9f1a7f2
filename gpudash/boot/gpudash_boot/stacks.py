"""Where each thread of a job's process waits, when gpudash asks (a stalled job): each thread's
innermost frame of the job's own code and its innermost frame of all (and, on Linux, its CPU
seconds: gpudash asks twice, and a thread that moved or computed is working), sent back over the channel.
Answered by a thread of gpudash's that is there already (the hooks' flusher; in a forked
DataLoader worker, a thread of its own started at the fork), so nothing the job's code can see
changes. Standard library only (``hooks.py`` puts it in).
"""

from __future__ import annotations

import os
import select
import sys
import threading
from collections.abc import Callable
from typing import Any

from .sync_sites import shared_classifier
from .wire import STACKS

MAX_THREADS = 32  # threads an answer names
FLUSHER = "gpudash-job-flush"  # the name of gpudash's own thread in the job's processes


def answer(channel: Any, rank: int, worker: bool) -> None:
    """Send where each thread of this process waits (gpudash's own threads left out)."""
    classifier = shared_classifier()
    ours = frozenset(t.ident for t in threading.enumerate() if t.name == FLUSHER and t.ident is not None)
    threads = thread_stacks(lambda f: classifier.kind(f)[0], ours)[:MAX_THREADS]
    message = {"k": STACKS, "rank": rank, "pid": os.getpid(), "worker": worker, "threads": threads}
    channel.send(message)


def answering(channel: Any, rank: Callable[[], int]) -> None:
    """Start a forked worker's thread that answers stack requests."""
    threading.Thread(target=answer_forever, args=(channel, rank), name=FLUSHER, daemon=True).start()


def answer_forever(channel: Any, rank: Callable[[], int]) -> None:
    """A forked worker's one thread of gpudash's: stack requests answered as they come."""
    while True:
        try:
            select.select([channel.sock], [], [], 5.0)
            for request in channel.requests():
                if request.get("k") == STACKS:
                    answer(channel, rank(), True)
        except Exception:  # noqa: BLE001 - never into the worker
            return


def thread_cpu_s(native_id: int | None) -> float | None:
    """The CPU seconds a thread of this process has used (Linux: ``/proc/self/task/ID/stat``); None
    elsewhere. gpudash compares two answers: a thread that computes is not stalled."""
    if native_id is None:
        return None
    try:
        with open(f"/proc/self/task/{native_id}/stat", encoding="ascii", errors="replace") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime
    except (OSError, ValueError, IndexError):
        return None


WORKER_LOOP = "_worker_loop"  # torch's DataLoader worker: the frames outside it are the fork's, not the worker's


def thread_stacks(classify: Callable[[str], str], skip: frozenset[int] = frozenset()) -> list[dict[str, Any]]:
    """Each thread's innermost frame of the job's own code (``classify(filename) == "user"``) and
    its innermost frame of all, main thread first; ``skip``: gpudash's own threads. In a forked
    DataLoader worker the search stops at torch's worker loop: the frames outside it are those the
    fork copied from the training loop (a worker waiting for work has no frame of the job's)."""
    import linecache

    names = {t.ident: t.name for t in threading.enumerate()}
    native = {t.ident: t.native_id for t in threading.enumerate()}
    main = threading.main_thread().ident
    out: list[dict[str, Any]] = []
    for ident, frame in sys._current_frames().items():
        if ident in skip:
            continue
        inner = frame
        user = None
        f: Any = frame
        depth = 0
        while f is not None and depth < 200:
            if f.f_code.co_name == WORKER_LOOP:
                break
            if classify(f.f_code.co_filename) == "user":
                user = f
                break
            f = f.f_back
            depth += 1
        entry: dict[str, Any] = {
            "thread": names.get(ident, str(ident)),
            "main": ident == main,
            "inner": {"file": inner.f_code.co_filename, "line": inner.f_lineno, "function": inner.f_code.co_name},
        }
        cpu = thread_cpu_s(native.get(ident))
        if cpu is not None:
            entry["cpu_s"] = cpu
        if user is not None:
            text = linecache.getline(user.f_code.co_filename, user.f_lineno).strip()
            entry["user"] = {
                "file": user.f_code.co_filename,
                "line": user.f_lineno,
                "function": user.f_code.co_name,
                "text": text or None,
            }
        out.append(entry)
    out.sort(key=lambda e: (not e["main"], "user" not in e))
    return out
