"""The CUDA caching allocator's history over a few of the job's steps, on gpudash's request (``gpudash
diagnose --memory``, the dashboard's key): from one step boundary, every allocation with its Python
stack (``torch.cuda.memory._record_memory_history``), and after the steps asked for, the snapshot
dumped to a file that gpudash reads in its own process (``gpudash.diagnosis.memory_peak``). The
recorded steps are slower (a stack a tensor): their time is gpudash's, left out of every figure.
A recording the job started itself is not touched: gpudash then says so and records nothing.
Standard library and the job's own torch only."""

from __future__ import annotations

import contextlib
import os
import pickle
import threading
import time
from collections.abc import Callable
from typing import Any

from . import allocator_history as history
from .wire import MEMPEAK

MAX_STEPS = 5


class MemoryHistory:
    """``ask(request)`` from any thread; ``at_step(step, device)`` at each step boundary (the
    training thread); ``close()`` before the job's teardown. A request with ``mark`` (sent to the
    ranks other than the recording one) records nothing: its steps are marked as gpudash's."""

    def __init__(self, torch: Any) -> None:
        self.torch = torch
        self.send: Callable[[dict[str, Any]], None] = lambda _m: None
        self.rank: Callable[[], int] = lambda: 0
        self.asked: dict[str, Any] | None = None
        self.lock = threading.Lock()
        self.window: dict[str, Any] | None = None
        self.dumped = False  # the snapshot was dumped at the last step boundary: the next step is slower

    @property
    def running(self) -> bool:
        """The step under way is recorded, or follows the snapshot's dump."""
        return self.window is not None or self.dumped

    def ask(self, request: dict[str, Any]) -> None:
        with self.lock:
            self.asked = request

    def at_step(self, step: int, device: str) -> None:
        self.dumped = False
        window = self.window
        if window is not None:
            window["done"] += 1
            if window["done"] >= window["steps"]:
                self.window = None
                self._end(window)
            return
        with self.lock:
            asked = self.asked
            if asked is None or step < int(asked.get("at", 0) or 0):
                return
            self.asked = None
        if asked.get("mark"):  # another rank's recording: this rank's same steps are slowed too (it waits
            self.window = dict(asked, done=0, steps=_steps(asked))  # for that rank): marked, nothing recorded
            return
        if not device.startswith("cuda"):
            self._say("needs CUDA (its caching allocator keeps the history); this job runs on the CPU")
            return
        try:
            self._start(dict(asked, device=device))
        except Exception as exc:  # noqa: BLE001 - said to gpudash; the job goes on
            self._say(f"{type(exc).__name__}: {exc}")

    def _start(self, window: dict[str, Any]) -> None:
        if history.recording(self.torch):
            self._say("the job records the allocator's history itself: gpudash leaves its recording alone")
            return
        window.update(done=0, steps=_steps(window))
        history.start(self.torch)
        window["start_t"] = time.monotonic()
        self.window = window

    def _end(self, window: dict[str, Any]) -> None:
        if window.get("mark"):
            self.dumped = True  # the recording rank dumps its snapshot now: the next step waits for it
            return
        stopped = time.monotonic()
        path = os.path.join(str(window.get("dir", ".")), f"memory-rank{self.rank()}-{os.getpid()}.pickle")
        message: dict[str, Any] = {"k": MEMPEAK, "rank": self.rank(), "steps": window["done"], "path": ""}
        message.update(wall_ms=(stopped - window["start_t"]) * 1e3, max_entries=history.MAX_ENTRIES)
        try:
            snapshot = history.snapshot(self.torch)
            index = self.torch.device(window["device"]).index
            message["device"] = index if index is not None else self.torch.cuda.current_device()
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
            with open(path, "wb") as f:
                pickle.dump(snapshot, f, protocol=pickle.HIGHEST_PROTOCOL)
            message["path"] = path
        except Exception as exc:  # noqa: BLE001 - said to gpudash; the job goes on
            message["error"] = f"{type(exc).__name__}: {exc}"
            with contextlib.suppress(OSError):
                os.remove(path)  # a part written (a full disk): not left behind
        finally:
            history.stop(self.torch)
        message["dump_ms"] = (time.monotonic() - stopped) * 1e3
        self.dumped = True
        self.send(message)

    def _say(self, error: str) -> None:
        self.send({"k": MEMPEAK, "rank": self.rank(), "steps": 0, "path": "", "error": error})

    def close(self) -> None:
        """The job tears down: a recording under way stopped, nothing dumped (said to gpudash)."""
        window, self.window = self.window, None
        with self.lock:
            asked, self.asked = self.asked, None
        if window is None or window.get("mark"):
            if window is None and asked is not None and not asked.get("mark"):
                self._say("the job ended before the allocator's recording began")
            return
        try:
            history.stop(self.torch)
        except Exception:  # noqa: BLE001, S110 - the job's teardown goes on
            pass
        self._say("the job ended during the allocator's recording")


def _steps(asked: dict[str, Any]) -> int:
    return max(1, min(MAX_STEPS, int(asked.get("steps") or 1)))
