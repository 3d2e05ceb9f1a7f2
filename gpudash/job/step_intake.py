"""A job's step records as gpudash takes them in: each process's own, checked, on gpudash's clock,
and counted per rank however many processes step as that rank.

Each process says when it makes its first step (``first``, with its monotonic clock then): its
records are placed on gpudash's clock by the offset measured then (a process in a time namespace
has a clock of its own), and must go on from its own last step. A rank's steps are counted in all:
each record adds its process's steps since its last one, so a second training in a row (a shell
script's) goes on from the first's count (the sum), and processes stepping at the same time as one
rank (Hogwild) add up, each one's steps also counted apart (``processes``). Torch-free.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from gpudash.job.step_record import StepRecord

WHY_DROPPED = "a bad number, a time outside the run, or a step counted before"
IN_SEQUENCE, AT_ONCE = "one after the other", "at once"
STEPPING_S = 5.0  # a process that stepped this recently steps still: another one's first step is "at once"


@dataclass
class ProcessSteps:
    """One process's steps: its rank, its clock's offset onto gpudash's, its own last step."""

    pid: int
    rank: int
    offset: float = 0.0
    last_step: int = 0
    first_t: float | None = None  # its first and latest step (gpudash's clock, monotonic)
    last_t: float | None = None
    ended: bool = False  # another process took its place as the rank's (its hello came after this one's end)

    def as_dict(self, t0: float) -> dict[str, Any]:
        def at(t: float | None) -> float | None:
            return None if t is None else round(t - t0, 3)

        first, last = at(self.first_t), at(self.last_t)
        return {"pid": self.pid, "rank": self.rank, "steps": self.last_step, "first_s": first, "last_s": last}


class StepIntake:
    """``first(m, now)`` for each process's first-step message, ``records(rank, pid, raw, now)``
    for its step records; ``processes`` and ``combined`` say how a rank's processes were counted."""

    def __init__(self, t0: float, say: Callable[[str], None]) -> None:
        self.t0 = t0
        self.say = say  # a note of the job's (an error event)
        self.processes: dict[int, ProcessSteps] = {}  # pid -> its steps
        self.rank_steps: dict[int, int] = {}  # rank -> its steps in all
        self._lead_pid: dict[int, int] = {}  # rank -> the process whose clock its phases are on (its latest)
        self._bad: dict[int, int] = {}  # rank -> records dropped
        self.joined: list[str] = []  # notes not yet told: a process that steps as a rank another stepped as

    def first(self, m: dict[str, Any], rank: int, pid: int, now: float) -> None:
        """A process's first step: its clock's offset onto gpudash's."""
        process = self.processes.get(pid)
        if process is None or process.rank != rank:
            process = self.processes[pid] = ProcessSteps(pid, rank)
        process.last_step = 0  # its steps count from here (a second run in the same process)
        mono = m.get("mono")  # the process's clock at its first step: its records' offset onto ours
        if isinstance(mono, (int, float)) and math.isfinite(mono):
            process.offset = now - float(mono)
        self._lead_pid[rank] = pid

    def _joined(self, process: ProcessSteps, t: float) -> None:
        """A process's first step counted: where another stepped as its rank before, how the two add up."""
        others = [p for p in self.processes.values() if p.rank == process.rank and p is not process and p.last_t]
        if not others:
            return
        stepping = [p for p in others if p.last_t is not None and not p.ended and t - p.last_t < STEPPING_S]
        if stepping:
            names = ", ".join(f"pid {p.pid}" for p in stepping)
            self.joined.append(
                f"pid {process.pid} steps as rank {process.rank} while {names} steps too: its steps are counted "
                "in all (and each process's apart, in run.json)"
            )
            return
        for p in others:
            p.ended = True
        before = self.rank_steps.get(process.rank, 0)
        self.joined.append(
            f"pid {process.pid} steps as rank {process.rank} after {before} steps of those before it: "
            "its steps add to theirs"
        )

    def offset(self, rank: int) -> float:
        """The offset of the rank's latest process's clock (its phases' times)."""
        process = self.processes.get(self._lead_pid.get(rank, -1))
        return process.offset if process is not None else 0.0

    def records(self, rank: int, pid: int, raw: Any, now: float) -> Iterator[StepRecord]:
        """The valid records of ``raw``, on gpudash's clock, numbered by the rank's steps in all;
        the first bad one of a rank is said."""
        process = self.processes.get(pid)
        if process is None or process.rank != rank:  # no first-step message seen from it (a hooks' older record)
            process = self.processes.get(self._lead_pid.get(rank, -1)) or self.processes.setdefault(
                pid, ProcessSteps(pid, rank)
            )
        for item in raw if isinstance(raw, list) else []:
            record = StepRecord.parse(item, process.offset, process.pid)
            if record is None or not self.t0 - 1.0 <= record.t <= now + 1.0 or record.step <= process.last_step:
                self._dropped(rank)  # not a step of this job's: forged, or from another clock
                continue
            if process.first_t is None:
                self._joined(process, record.t)
            total = self.rank_steps.get(rank, 0) + record.step - process.last_step
            process.last_step, self.rank_steps[rank] = record.step, total
            process.first_t = record.t if process.first_t is None else process.first_t
            process.last_t = record.t
            yield replace(record, step=total)

    def _dropped(self, rank: int) -> None:
        self._bad[rank] = self._bad.get(rank, 0) + 1
        if self._bad[rank] == 1:
            self.say(f"rank {rank} sent a step record that is not one: dropped ({WHY_DROPPED})")

    def combined(self) -> str:
        """How the steps of a rank's processes were combined: "" (one process a rank), the sum
        (``IN_SEQUENCE``), or in all (``AT_ONCE``: their steps overlapped in time)."""
        by_rank: dict[int, list[ProcessSteps]] = {}
        for p in self.processes.values():
            if p.first_t is not None and p.last_t is not None:
                by_rank.setdefault(p.rank, []).append(p)
        how = ""
        for processes in by_rank.values():
            spans = sorted((p.first_t or 0.0, p.last_t or 0.0) for p in processes)
            if len(spans) > 1:
                overlap = any(later[0] < earlier[1] for earlier, later in zip(spans, spans[1:], strict=False))
                how = AT_ONCE if overlap else how or IN_SEQUENCE
        return how

    def as_list(self) -> list[dict[str, Any]]:
        """Each process that stepped: pid, rank, steps, its first and last step (run's seconds)."""
        return [p.as_dict(self.t0) for p in self.processes.values() if p.first_t is not None]
