"""Whether a job with no step for long is stalled or computing a long step. Torch-free.

Before a job is called stalled (``gpudash.job.stalls``), each of its processes is asked twice,
``GAP_S`` apart, where each thread is (``gpudash/boot/gpudash_boot/stacks.py``: each thread's
innermost frames and, on Linux, its CPU seconds), and each process's CPU seconds are read from
``/proc``. The job is *working*, not stalled, where between the two looks a process's training
thread (its main thread: a DataLoader worker's too) has moved — another innermost frame or line, or
another frame of the job's own code — or has used at least ``BUSY_SHARE`` of the time on a CPU (or,
waiting in autograd's engine, whose threads run a GPU's backward, its process has), or a process
that could not answer (a thread holding the GIL in native code) has. With several ranks, a thread
that waits inside a collective (for another rank) is not: the rank it waits for says. So a step of
LBFGS that evaluates its closure for a minute is a long step; a job hung on a lock, a queue or a
hung rank is stalled. A wait that polls (``lock.acquire(timeout=…)`` in a loop) may move between two
looks: it is then taken for work until the next look, ``AGAIN_S`` later.
"""

from __future__ import annotations

import os
from typing import Any

from gpudash.core.lenient import float_or_none
from gpudash.job.stalls import Stall, waits_for_peers

GAP_S = 1.0  # the second look, this long after the first was asked
BUSY_SHARE = 0.2  # a thread on a CPU this share of the time between the looks computes


def process_cpu_s(pid: int) -> float | None:
    """The CPU seconds (user and system) process ``pid`` has used so far; None where ``/proc``
    does not say (not Linux, the process gone)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        ticks = os.sysconf("SC_CLK_TCK")
        return (int(fields[11]) + int(fields[12])) / ticks  # utime, stime: the 14th and 15th fields
    except (OSError, ValueError, IndexError):
        return None


def look_at_cpus(look: Stall) -> None:
    """Each asked process's CPU seconds now, into ``look.cpu``."""
    for pid in look.asked:
        seconds = process_cpu_s(pid)
        if seconds is not None:
            look.cpu[pid] = seconds


def training_thread(answer: dict[str, Any] | None) -> dict[str, Any] | None:
    """The thread of a process's answer that trains: its main thread."""
    for thread in (answer or {}).get("threads") or []:
        if isinstance(thread, dict) and thread.get("main"):
            return thread
    return None


def _frames(thread: dict[str, Any]) -> tuple[Any, ...]:
    inner, user = thread.get("inner") or {}, thread.get("user") or {}
    return tuple(d.get(k) for d in (inner, user) if isinstance(d, dict) for k in ("file", "line", "function"))


def _busy(before: float | None, after: float | None, seconds: float) -> bool:
    return before is not None and after is not None and seconds > 0 and after - before >= BUSY_SHARE * seconds


def working(first: Stall, second: Stall) -> str | None:
    """Why the job is working between two looks (the processes asked in both), or None: it stalled."""
    seconds = second.asked_at - first.asked_at
    ranks = sum(1 for who in second.asked.values() if who.startswith("rank"))
    for pid, who in second.asked.items():
        if pid not in first.asked:
            continue
        answer = second.answers.get(pid)
        before, after = training_thread(first.answers.get(pid)), training_thread(answer)
        process_busy = _busy(first.cpu.get(pid), second.cpu.get(pid), seconds)
        if before is not None and after is not None:
            if ranks > 1 and waits_for_peers(answer):
                continue  # it waits for another rank: that one says
            if _frames(before) != _frames(after):
                return f"{who} moved on (its stack changed)"
            if _busy(float_or_none(before.get("cpu_s")), float_or_none(after.get("cpu_s")), seconds):
                return f"{who} computes (its training thread is on a CPU)"
            if process_busy and in_backward(after):
                return f"{who} computes its backward (autograd's threads are on a CPU)"
        elif pid not in second.answers and process_busy:
            return f"{who} computes in native code (it did not answer; its CPU time advanced)"
    return None


def in_backward(thread: dict[str, Any]) -> bool:
    """The thread waits in autograd's engine (``loss.backward()``), whose own threads run a GPU's
    backward: the process's CPU time says whether they compute."""
    inner = thread.get("inner") or {}
    return "/torch/autograd/" in str(inner.get("file", "")).replace("\\", "/")
