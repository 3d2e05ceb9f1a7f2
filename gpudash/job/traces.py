"""A job's profiler windows: asked of its lead process, read in the background within a memory
bound (``gpudash.engine.trace_read``), and made into figures for the session.

A trace is read off the session's thread, so a large one never holds up the dashboard or the
recording, and within ``MAX_EVENTS`` events: a window that held more is cut to its first whole
steps, and the session says so. Once a trace's size per step is known, later windows ask for no
more steps than make ``TRACE_BYTES`` of trace (a step of thousands of small operators writes tens
of MB). Torch-free.
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from gpudash.boot.gpudash_boot import wire
from gpudash.core.lenient import float_or, int_or
from gpudash.core.textfmt import plain, strip_controls
from gpudash.engine.trace_read import MAX_EVENTS, read_bounded

TRACE_BYTES = 64 << 20  # the trace a window may write: later windows ask for fewer steps past it
PERIODIC_WAIT_S = 120.0  # a periodic window unanswered this long (replaced, lost with its process): the next may come
MAX_STEPS = 100_000  # a window's steps, at the most a job's answer may say (gpudash asks for 200 at most)
DISTORTED = 1.2  # a window whose steps run slower than this × untraced ones: its figures are the window's
WINDOW_SHARE = 0.03  # periodic windows (--trace-every) cost the job at most this share of its time: with
# the first window's (its cost not known before it ran) and the hooks' own, the job keeps 0.93× of its bare speed


@dataclass(frozen=True)
class TraceRead:
    """A window's trace, read: its figures (None, and ``error``, where it could not be read)."""

    purpose: str  # "trace", or the diagnosis' own
    path: str
    figures: Any = None
    error: str = ""
    note: str = ""  # the window was cut short, or later ones will be
    rank: int = 0  # the rank whose window it was
    steps: int = 0  # the window's steps
    wall_ms: float = 0.0  # from the window's start to the profiler's stop
    warmup_steps: int = 0  # steps the profiler ran before its own (attaching CUPTI), in wall_ms too
    export_ms: float = 0.0  # writing its trace, after that (the job waits for it too)
    window: str = ""  # the request it answers (the same on every rank asked)
    ranks: int = 1  # how many ranks were asked for it
    steps_ms: float = 0.0  # its steps alone, the profiler's start and stop left out (0: not said)
    step_ms: tuple[float, ...] = ()  # each traced step's time
    comm_sizes: dict[str, tuple[int, int]] = field(default_factory=dict)  # its collectives: (calls, bytes) by kind
    calls: bool = False  # a GPU-only window that recorded every CUDA call too (a torch without per-kind selection)
    calls_why: str = ""  # ... and why they could not be left out (a line from the job)

    def slowdown(self, step_s: float | None) -> float | None:
        """A traced step (the median) over an untraced one (``step_s``); None where either is unknown."""
        if not self.step_ms or not step_s:
            return None
        return statistics.median(self.step_ms) / (step_s * 1e3)

    def weighed(self, step_s: float | None) -> str:
        """The window weighed against the untraced steps, in words ("" where it cannot be): a
        window whose steps ran over ``DISTORTED`` × untraced ones is said to be distorted."""
        slowed = self.slowdown(step_s)
        if slowed is None:
            return ""
        said = f"a traced step {slowed:.2f}× an untraced one"
        if slowed > DISTORTED:
            said = f"a distorted window: {said}, so its figures describe the window more than the job"
            if self.calls:
                said += f" (it recorded every CUDA call as well: {self.calls_why or 'this torch selects no kinds'})"
        return said

    def exposed_ms(self, step_s: float | None) -> float | None:
        """Its exposed collectives in ms of the job's untraced step (``step_s``; the traced step's
        where that is not known yet); None without collectives."""
        if self.figures is None:
            return None
        return self.figures.comm_exposed_ms_of(step_s * 1e3) if step_s else self.figures.comm_exposed_ms_per_step

    def cost_s(self, step_s: float | None) -> float | None:
        """The seconds the window cost the job: its time less what its steps take untraced."""
        if step_s is None or self.steps < 1 or self.wall_ms <= 0:
            return None
        return max(0.0, (self.wall_ms + self.export_ms) / 1e3 - (self.steps + self.warmup_steps) * step_s)

    def cost(self, step_s: float | None) -> str:
        """What the window cost the job, in words (``step_s``: a step's time untraced)."""
        extra = self.cost_s(step_s)
        if extra is None or step_s is None:
            return ""
        untraced = (self.steps + self.warmup_steps) * step_s
        warm = f" and {self.warmup_steps} warming the profiler up" if self.warmup_steps else ""
        return (
            f"the window cost the job {plain(extra, 2)} s: its {self.steps} steps{warm} took "
            f"{plain(self.wall_ms / 1e3, 2)} s "
            f"against {plain(untraced, 2)} s untraced, and writing the trace {plain(self.export_ms / 1e3, 2)} s "
            "(those steps are left out of every figure)"
        )


class JobTraces:
    """``ask(purpose, steps, ...)`` a window of each rank's process, ``received(m)`` each answer, and
    ``done()`` the windows read since the last call."""

    def __init__(self, max_events: int = MAX_EVENTS) -> None:
        self.max_events = max_events
        self.step_cap: int | None = None  # the steps a window may have (its trace's size known)
        self._asked: dict[str, tuple[str, str, int]] = {}  # path -> (purpose, window, ranks asked)
        self._seq = 0
        self._done: list[TraceRead] = []
        self._lock = threading.Lock()
        self.cost_s = 0.0  # what the latest periodic window cost the job
        self.ended_at: float | None = None  # when it ended (monotonic)
        self.periodic_open = False  # a periodic window asked for and not yet read: the next waits ...
        self.periodic_asked_at = 0.0  # ... at most ``PERIODIC_WAIT_S`` after it was asked (monotonic)

    def spaced(self, now: float) -> str:
        """Why a periodic window may not start yet ("" where it may): each costs the job what the
        last one did, and they come no more often than keeps that at ``WINDOW_SHARE`` of its time."""
        if self.ended_at is None or not self.cost_s:
            return ""
        every = self.cost_s / WINDOW_SHARE
        if now - self.ended_at >= every:
            return ""
        return (
            f"profiler windows cost this job about {plain(self.cost_s, 2)} s each: one every {plain(every, 2)} s at "
            f"most keeps them at {100 * WINDOW_SHARE:.0f}% of its time, so the windows asked for more often are skipped"
        )

    def ask(self, purpose: str, steps: int, folder: str, slug: str, ranks: Iterable[int]) -> tuple[dict[str, Any], str]:
        """The request to send to each of ``ranks`` (its steps within the cap), and a note where
        the cap cut them."""
        self._seq += 1
        if purpose == "trace":
            self.periodic_open, self.periodic_asked_at = True, time.monotonic()
        name = f"{slug}-{self._seq}"
        asked_ranks = list(ranks)
        for rank in asked_ranks:
            self._asked[wire.trace_path(folder, name, rank)] = (purpose, name, len(asked_ranks))
        asked = max(1, steps)
        fewer = min(asked, self.step_cap) if self.step_cap is not None else asked
        note = "" if fewer == asked else f"a window of {fewer} steps, not {asked}: this job's trace is large"
        return {"k": wire.TRACE, "steps": fewer, "dir": folder, "name": name}, note

    def received(self, m: dict[str, Any]) -> None:
        """A rank's answer: the window's trace is read in the background."""
        path = str(m.get("path", ""))
        purpose, window, asked = self._asked.pop(path, ("trace", path, 1))
        rank = max(0, int_or(m.get("rank"), 0))
        if m.get("error"):
            why = f"profiler window failed: {m['error']}"
            self._finish(TraceRead(purpose, path, error=why, rank=rank, window=window, ranks=asked))
            return
        steps = min(max(1, int_or(m.get("steps"), 1)), MAX_STEPS)
        timing: dict[str, Any] = {"steps": steps, "wall_ms": float_or(m.get("wall_ms"))}
        timing |= {"export_ms": float_or(m.get("export_ms")), "window": window, "ranks": asked}
        timing |= {"steps_ms": max(0.0, float_or(m.get("steps_ms"))), "step_ms": _floats(m.get("step_ms"))}
        timing["comm_sizes"] = _sizes(m.get("comm_sizes"))
        timing["warmup_steps"] = min(max(0, int_or(m.get("warmup_steps"), 0)), MAX_STEPS)
        timing["calls"] = m.get("calls") is True
        timing["calls_why"] = strip_controls(str(m.get("calls_why") or ""))[:200] if timing["calls"] else ""
        args = (purpose, path, rank, timing)
        threading.Thread(target=self._read, args=args, name="gpudash-trace-read", daemon=True).start()

    def done(self) -> list[TraceRead]:
        with self._lock:
            out, self._done = self._done, []
        return out

    def _read(self, purpose: str, path: str, rank: int, timing: dict[str, Any]) -> None:
        from gpudash.engine.trace_figures import figures

        steps, wall_ms = int(timing["steps"]), float(timing["wall_ms"])
        try:
            size = os.path.getsize(path)
            trace = read_bounded(path, self.max_events)
        except Exception as exc:  # noqa: BLE001 - any file at all: said, and the next window may come
            why = f"cannot read the profiler window's trace {path}: {exc}"
            self._finish(TraceRead(purpose, path, error=why, rank=rank, window=timing["window"], ranks=timing["ranks"]))
            return
        in_file = trace.steps_in_file or steps
        kept = trace.steps if trace.steps_in_file else steps
        note = ""
        if in_file and size / in_file * max(1, steps) > TRACE_BYTES:
            self.step_cap = max(1, int(TRACE_BYTES * in_file / size))
            note = f"a step's trace is {size / in_file / 2**20:.0f} MB: later windows take {self.step_cap} steps"
        if trace.cut_short:
            note = f"cut short to its first {kept} of {in_file} steps (its trace: {size / 2**20:.0f} MB); " + note
        steps_wall = float(timing["steps_ms"]) or wall_ms  # its steps' own time where the job said it
        fig = figures(trace.events, max(1, kept), steps_wall * kept / max(1, in_file))
        self._finish(TraceRead(purpose, path, figures=fig, note=note.rstrip("; "), rank=rank, **timing))

    def _finish(self, read: TraceRead) -> None:
        with self._lock:
            self._done.append(read)


def _sizes(value: Any) -> dict[str, tuple[int, int]]:
    """A window's collectives' (calls, bytes) by kind from a message (anything else dropped)."""
    if not isinstance(value, dict):
        return {}
    out = {}
    for kind, pair in list(value.items())[:32]:
        if isinstance(kind, str) and isinstance(pair, list) and len(pair) == 2 and all(type(v) is int for v in pair):
            if pair[0] > 0 and pair[1] >= 0:
                out[kind] = (pair[0], pair[1])
    return out


def _floats(value: Any) -> tuple[float, ...]:
    """A list of positive numbers from a message (a hostile one: anything else dropped)."""
    if not isinstance(value, list):
        return ()
    return tuple(f for v in value[:1000] if (f := float_or(v)) > 0)
