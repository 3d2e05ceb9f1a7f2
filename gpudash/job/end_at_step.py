"""Ending a job's measuring run at a step boundary, every rank after the same step. Torch-free.

gpudash ends its own measuring runs (``diagnose``, tune's candidates, ``--steps``, ``--duration``,
the dashboard's stop) by asking each of the job's processes to end after a step it names: the
hooks raise ``SystemExit(0)`` at that step's boundary, so the job's ``finally`` blocks run and no
traceback is printed. The step is the same for every rank — the latest any rank has reported, and
enough more for the slowest to hear the request before it gets there — so that no rank waits in a
collective for one that has left. A job that does not reach it (it is evaluating, or stuck) is
ended with signals, as before. The same naming of a step lets every rank open a profiler window
at the same step.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable

HEAR_S = 1.0  # the time a rank may take to hear a request (the hooks read them each 0.1-0.2 s)
EXTRA_STEPS = 3  # steps beyond that, for the ranks' step counts gpudash has not heard yet
TEARDOWN_S = 15.0  # after the step: the job's finally blocks, its process group's teardown, exit
MAX_WAIT_S = 60.0  # the longest gpudash waits for a quiet end before it sends signals


def agreed_step(latest: Iterable[int], steps_per_s: float | None, ranks: int) -> int:
    """The step every rank ends (or starts a window) after: the next one for a job of one process;
    for several ranks, the latest any has reported plus what they may make before they all hear."""
    last = max(latest, default=0)
    if ranks <= 1:
        return last + 1
    return last + EXTRA_STEPS + math.ceil(max(0.0, steps_per_s or 0.0) * HEAR_S)


def wait_s(steps_to_go: int, steps_per_s: float | None) -> float:
    """How long to wait for the job to end by itself after ``steps_to_go`` more steps."""
    stepping = steps_to_go / steps_per_s if steps_per_s else steps_to_go * 1.0
    return min(MAX_WAIT_S, stepping + TEARDOWN_S)


def plan(
    sockets: list[str], latest: list[int], steps_per_s: float | None, ranks: int, quiet_for_s: float | None
) -> tuple[int, float] | None:
    """(the step to end after, how long to wait for it), or None where a quiet end cannot be had:
    a rank without a socket, or a job that has not stepped lately (``quiet_for_s``: since its last step,
    None before any) — then signals."""
    if not sockets or not all(sockets) or quiet_for_s is None or quiet_for_s >= 5.0 + 3.0 / (steps_per_s or 1.0):
        return None
    step = agreed_step(latest, steps_per_s, ranks)
    return step, wait_s(step - max(latest, default=0), steps_per_s)


def wait_for_exit(poll: Callable[[], int | None], drain: Callable[[], None], timeout_s: float) -> int | None:
    """``poll()`` until the job has exited (its status) or ``timeout_s`` passed (None); ``drain()``
    the channel meanwhile, so that nothing the job says at its end is lost."""
    deadline = time.monotonic() + timeout_s
    while True:
        drain()
        code = poll()
        if code is not None or time.monotonic() >= deadline:
            return code
        time.sleep(0.02)
