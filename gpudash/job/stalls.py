"""A job that stopped stepping: when it counts as stalled, and where it waits. Torch-free.

A job with no step for ``max(STALL_MIN_S, STALL_STEPS ×`` its median step) while in no phase the
hooks time (evaluation, a checkpoint, compiling) may be *stalled*: never before its median step is
known (a first step of a minute is its start-up and its first timed step, not a stall), and only
where its processes, looked at twice, neither moved nor computed (``gpudash.job.stall_probe``: a
long step that computes is a step). gpudash asks each of its
processes (each rank, each DataLoader worker) for the stack of each thread; the hooks' flusher
thread, there already, answers with each thread's innermost frame of the job's own code (and its
innermost frame of all), so nothing the job's code can see changes. A process that does not answer
within ``ANSWER_S`` has a thread holding the GIL in native code: that is said instead. The answer
is told again every ``AGAIN_S`` while the stall lasts.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

STALL_MIN_S = 30.0  # no step for at least this long ...
STALL_STEPS = 10.0  # ... and this many median steps: stalled
ANSWER_S = 3.0  # how long the processes have to answer
AGAIN_S = 60.0  # asked and told again this often while the stall lasts


def stall_after_s(median_step_s: float, minimum_s: float = STALL_MIN_S) -> float:
    """How long without a step makes a stall, for a job whose median step is ``median_step_s``."""
    return max(minimum_s, STALL_STEPS * median_step_s)


@dataclass
class Stall:
    """One stall: since the lead rank's last step, the processes asked, and their answers."""

    since: float  # the last step's end (monotonic)
    asked_at: float
    asked: dict[int, str] = field(default_factory=dict)  # pid -> "rank N" / "DataLoader worker"
    answers: dict[int, dict[str, Any]] = field(default_factory=dict)  # pid -> its answer
    told_at: float | None = None
    first_rank: int = 0  # the rank whose last step is the oldest: the one that stalled first
    cpu: dict[int, float] = field(default_factory=dict)  # pid -> its CPU seconds when asked (/proc)

    def complete(self, now: float) -> bool:
        """Every process asked has answered, or the time to answer is up."""
        return set(self.asked) <= set(self.answers) or now - self.asked_at >= ANSWER_S


def _site(frame: dict[str, Any]) -> str:
    where = f"{os.path.basename(str(frame.get('file', '?')))}:{frame.get('line', '?')}"
    text = frame.get("text")
    return f"{where} in {frame.get('function', '?')}" + (f": {text}" if text else "")


def thread_line(who: str, thread: dict[str, Any]) -> str:
    """ "rank 0 MainThread waits at train.py:41 in main: lock.acquire()" (the job's own frame),
    "… in threading.py:320 in wait" when none of its frames is the job's."""
    name = str(thread.get("thread", "?"))
    user, inner = thread.get("user"), thread.get("inner") or {}
    if isinstance(user, dict):
        return f"{who} {name} waits at {_site(user)}"
    return f"{who} {name} waits in {_site(inner)} (none of its frames is the job's code)"


PEERS = ("/torch/distributed/", "/torch/nn/parallel/", "/torch/autograd/")  # where a rank waits for the others


def waits_for_peers(answer: dict[str, Any] | None) -> bool:
    """The process's main thread waits inside a collective (an all-reduce, DDP's backward): for
    another rank, not of its own accord."""
    threads = [t for t in (answer or {}).get("threads") or [] if isinstance(t, dict) and t.get("main")]
    inner = str((threads[0].get("inner") or {}).get("file", "")) if threads else ""
    return any(part in inner.replace("\\", "/") for part in PEERS)


def report(stall: Stall, now: float, median_step_s: float | None) -> tuple[str, list[str]]:
    """The stall's one line (where the rank that stalled first waits, and for how long) and a line
    per thread of each process with a frame of the job's own code (unanswered processes said).
    The rank that stalled first: of the ranks, one that does not wait in a collective for the
    others (a straggler, a hang of its own), else the one whose last step is the oldest."""
    lines: list[str] = []

    def first(pid: int) -> tuple[bool, bool, bool, str]:
        who = stall.asked[pid]
        return (
            not who.startswith("rank"),
            waits_for_peers(stall.answers.get(pid)),
            who != f"rank {stall.first_rank}",
            who,
        )

    order = sorted(stall.asked, key=first)
    for pid in order:
        who = f"{stall.asked[pid]} (pid {pid})"
        answer = stall.answers.get(pid)
        if answer is None:
            lines.append(
                f"{who} did not answer within {ANSWER_S:g} s: a thread holds the GIL in native code "
                f"(py-spy dump --pid {pid} reads its stack)"
            )
            continue
        threads = [t for t in answer.get("threads") or [] if isinstance(t, dict)]
        own = [t for t in threads if isinstance(t.get("user"), dict)] or threads[:1]
        lines.extend(thread_line(who, t) for t in own)
    usual = f"; its steps take {median_step_s:.3g} s" if median_step_s else ""
    head = f"no step for {now - stall.since:.0f} s{usual}"
    return (f"{head}: {lines[0]}" if lines else head), lines
