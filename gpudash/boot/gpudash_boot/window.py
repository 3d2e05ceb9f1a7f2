"""A profiler window inside a job, when gpudash asks (``hooks.py``).
Standard library and the job's own torch only.

The window starts at the step boundary gpudash names (``at``: the same step on every rank) or the
next one with one step of warm-up (the profiler attached, nothing kept: attaching CUPTI stalls the
host), marks each step after it with a ``gpudash.step`` range (and times it: what a traced step
takes, the profiler's start and stop left out), and after its steps stops the profiler and writes
the trace where gpudash said; the warm-up step and the one during which the trace is written are
marked as slowed (their time is the window's, not the job's). Nothing of it reaches the job's output: the profiler's
Python warnings are caught, and what its native library prints on stderr while it starts, stops
and writes (Kineto's ``profiler_start``/``profiler_stop`` lines, a CPU build's device errors) is
taken aside — any line of the job's own that another thread wrote meanwhile goes back to stderr.
A window still open when the job tears down (``destroy_process_group``, the interpreter's exit) is
closed first, without a trace: a profiler left running into the teardown can crash it. On CUDA
12.6 or later CUPTI is torn down after each window (``TEARDOWN_CUPTI=1`` unless the job set it):
left subscribed, it slows every kernel launch of the job long after the window. gpudash's periodic
windows on a GPU record its kernels, copies and memsets alone: where torch selects CUPTI's kinds
(2.12 on) by asking for them, before by turning the CUDA calls' records off once the window has
started (``cupti_calls.py``).
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from typing import Any

from .cupti_calls import calls_unrecorded
from .wire import TRACE, trace_path

STEP_MARKER = "gpudash.step"
WARMUP_STEPS = 1  # the profiler started a step before the window's steps: CUPTI's attaching left out
# CUPTI's kinds a periodic window on a GPU records: the GPU's work, not the CUDA calls (docs/your-job.md)
GPU_KINDS = ("CONCURRENT_KERNEL", "GPU_MEMCPY", "GPU_MEMSET")
# a line of the profiler's native library: "USDT:2026-11-26 16:43:07 15779:15779 File.cpp:39] …"
NATIVE_LINE = re.compile(rb"^(USDT|STAGE|ERROR|WARNING|INFO|VERBOSE):\d{4}-\d\d-\d\d [\d:]+ \d+:\d+ [\w.]+:\d+\] ")


@contextlib.contextmanager
def profiler_warnings_dropped() -> Iterator[None]:
    """The profiler's Python warnings dropped for the block, any other shown as it would be. Not by
    ``warnings.catch_warnings``: changing the filters makes Python forget every warning it has
    shown once, and the job's own (torch's ``barrier()`` one) would be shown again."""
    original = warnings.showwarning

    def show(message: Any, category: Any, filename: str, lineno: int, file: Any = None, line: Any = None) -> None:
        if "profiler" in filename or os.path.basename(filename) == os.path.basename(__file__):
            return
        original(message, category, filename, lineno, file, line)

    warnings.showwarning = show
    try:
        yield
    finally:
        if warnings.showwarning is show:
            warnings.showwarning = original


@contextlib.contextmanager
def quiet_profiler() -> Iterator[None]:
    """The profiler's Python warnings dropped, and its native lines on stderr taken aside (fd 2 to a
    file for the block; any other line written meanwhile goes back to stderr after it)."""
    saved = aside = -1
    try:
        saved = os.dup(2)
        aside_file = tempfile.TemporaryFile()
        aside = aside_file.fileno()
        os.dup2(aside, 2)
    except OSError:
        aside_file = None
    try:
        with profiler_warnings_dropped():
            yield
    finally:
        if saved >= 0 and aside_file is not None:
            os.dup2(saved, 2)
            os.close(saved)
            with contextlib.suppress(OSError):
                aside_file.seek(0)
                kept = [line for line in aside_file.read().splitlines(keepends=True) if not NATIVE_LINE.match(line)]
                if kept:
                    os.write(2, b"".join(kept))
            aside_file.close()


def cupti_teardown_safe(torch: Any) -> bool:
    """Whether CUPTI may be finalized after a window: CUDA 12.6 or later (earlier, re-initializing it
    after a teardown could crash a job that uses CUDA graphs)."""
    try:
        major, minor = (int(part) for part in str(torch.version.cuda).split(".")[:2])
    except ValueError:
        return False
    return (major, minor) >= (12, 6)


class ProfilerWindow:
    """``ask(request)`` from gpudash; ``at_step(step)`` at each step boundary (True: the step that
    just ended ran under the window or its end); ``close()`` before the job's teardown."""

    def __init__(self, torch: Any, send: Callable[[dict[str, Any]], None], own_syncs: Callable[[], Any]) -> None:
        self.torch = torch
        self.send = send
        self.own_syncs = own_syncs  # a block whose host-device syncs are gpudash's, not the job's
        self.asked: dict[str, Any] | None = None  # set by whichever thread reads gpudash's requests
        self.lock = threading.Lock()  # ... and taken by the training thread: never lost in between
        self.window: dict[str, Any] | None = None
        self.rank = 0
        self.cuda = False
        self.sizes: Any = None  # the collectives' sizes over a window (comm.CommTimes), where set

    @property
    def running(self) -> bool:
        return self.window is not None

    def ask(self, request: dict[str, Any]) -> None:
        """A window asked for (the latest request wins); any thread."""
        with self.lock:
            self.asked = request

    def at_step(self, step: int) -> bool:
        """At a step boundary: end or mark the window's step, or start an asked-for one; True where
        the step that ended here was slowed by a window (its warm-up step, a traced one, its end)."""
        window = self.window
        if window is not None:
            if window.pop("warming", False):  # the warm-up step ended: the window's steps start here
                try:
                    self._record(window)
                except Exception as exc:  # noqa: BLE001 - said to gpudash; the job goes on
                    self.window = None
                    self._abandon(window, f"{type(exc).__name__}: {exc}")
                return True
            window["marker"].__exit__(None, None, None)
            window["marks"].append(time.monotonic())  # each traced step's end: the steps' own times
            window["done"] += 1
            if window["done"] >= int(window.get("steps", 20)):
                self.window = None
                self._end(window)
                return True
            window["marker"] = self.torch.autograd.profiler.record_function(STEP_MARKER)
            window["marker"].__enter__()
            return True
        with self.lock:
            asked = self.asked
            if asked is None or step < int(asked.get("at", 0) or 0):
                return False
            self.asked = None
        self.window = window = dict(asked, done=0)
        try:
            self._start(window)
        except Exception as exc:  # noqa: BLE001 - said to gpudash; the job goes on
            self.window = None
            error = f"{type(exc).__name__}: {exc}"
            self.send({"k": TRACE, "rank": self.rank, "steps": 0, "path": "", "error": error})
        return False

    def _start(self, window: dict[str, Any]) -> None:
        """The profiler started for its warm-up step (``WARMUP_STEPS``): CUPTI attached and its kinds
        enabled, nothing yet kept — attaching stalls the host tens of ms, which a window's first step
        would otherwise carry into its figures (the GPU idle meanwhile, the ranks pulled apart)."""
        from torch.profiler import ProfilerActivity, profile, schedule

        if self.cuda and cupti_teardown_safe(self.torch):
            # without it CUPTI stays subscribed after the window and slows every later launch
            # (pytorch/pytorch#144455); the job's own setting wins
            os.environ.setdefault("TEARDOWN_CUPTI", "1")
        activities: list[Any] = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.cuda else [])
        steps = max(1, int(window.get("steps", 20)))
        warm_then_record = schedule(wait=0, warmup=WARMUP_STEPS, active=steps, repeat=1)
        with self.own_syncs(), quiet_profiler():
            window["start_t"] = time.monotonic()
            if self.cuda and window.get("kernels_only"):  # the host's operators, recorded, slow its steps ~2×
                prof = self._gpu_only(profile, ProfilerActivity.CUDA, warm_then_record, window)
            else:
                prof = profile(activities=activities, schedule=warm_then_record)
            prof.start()
            if window.get("calls"):  # torch asked CUPTI for every CUDA call: turned off where it can be
                window["calls"] = calls_unrecorded() or False
        window["prof"], window["warming"] = prof, True

    def _record(self, window: dict[str, Any]) -> None:
        """The warm-up step done: the profiler keeps what follows, each step marked and timed."""
        from torch.profiler import ProfilerAction

        with self.own_syncs(), quiet_profiler():
            window["prof"].step()  # torch's schedule: from its warm-up to recording
        action = getattr(window["prof"], "current_action", ProfilerAction.RECORD)
        if action not in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE):  # Kineto stopped meanwhile
            raise RuntimeError(f"the profiler did not start recording ({action})")
        window["marker"] = self.torch.autograd.profiler.record_function(STEP_MARKER)
        window["marker"].__enter__()
        window["marks"] = [time.monotonic()]  # the first traced step starts here, the profiler recording
        if self.sizes is not None:
            self.sizes.start_sizing()

    @staticmethod
    def _gpu_only(profile: Any, cuda: Any, steps: Any, window: dict[str, Any]) -> Any:
        """A window of the GPU's work alone: its kernels, copies and memsets (``GPU_KINDS``), where
        torch selects CUPTI's kinds (2.12 on); before, CUDA's whole group, whose records of every
        CUDA call cost each launch (``window["calls"]``: turned off once started, or why not)."""
        try:
            return profile(activities=[{cuda: list(GPU_KINDS)}], schedule=steps)
        except (TypeError, ValueError, RuntimeError):  # this torch takes no selection (a dict is unhashable)
            window["calls"] = True
            return profile(activities=[cuda], schedule=steps)

    def _end(self, window: dict[str, Any]) -> None:
        path = trace_path(str(window.get("dir", ".")), str(window.get("name", "job")), self.rank)
        message: dict[str, Any] = {"k": TRACE, "rank": self.rank, "steps": window["done"], "path": path}
        message["start_t"], message["warmup_steps"] = window["start_t"], WARMUP_STEPS
        if window.get("calls"):  # it recorded every CUDA call too, and why (a line)
            message["calls"] = True
            message["calls_why"] = str(window["calls"])
        marks = window["marks"]
        message["steps_ms"] = (marks[-1] - marks[0]) * 1e3  # its steps alone: no profiler start nor stop
        message["step_ms"] = [round((b - a) * 1e3, 3) for a, b in zip(marks, marks[1:], strict=False)]
        if self.sizes is not None:
            message["comm_sizes"] = self.sizes.take_sizing()  # the bytes of its collectives, which its trace lacks
        with self.own_syncs(), quiet_profiler():
            window["prof"].stop()
            stopped = time.monotonic()
            message["wall_ms"] = (stopped - window["start_t"]) * 1e3  # its steps, up to the profiler's stop
            try:
                os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
                window["prof"].export_chrome_trace(path)
            except Exception as exc:  # noqa: BLE001 - said to gpudash; the job goes on
                message["error"] = f"{type(exc).__name__}: {exc}"
        message["export_ms"] = (time.monotonic() - stopped) * 1e3
        self.send(message)

    def close(self) -> None:
        """The job tears down: a running window stopped, its trace not written (said to gpudash)."""
        with self.lock:
            window, self.window, self.asked = self.window, None, None
        if window is not None:
            self._abandon(window, "the job ended during the profiler window")

    def _abandon(self, window: dict[str, Any], why: str) -> None:
        """A window stopped without its trace (the job's end, a profiler that would not record): said."""
        if self.sizes is not None:
            self.sizes.take_sizing()  # sizing stops with the window
        with contextlib.suppress(Exception), self.own_syncs(), quiet_profiler():
            if "marker" in window:  # past its warm-up step
                window["marker"].__exit__(None, None, None)
            window["prof"].stop()
        self.send({"k": TRACE, "rank": self.rank, "steps": window["done"], "path": "", "error": why})
