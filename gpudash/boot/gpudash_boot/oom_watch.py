"""The job dies of an out-of-memory error: gpudash is told where and what the memory held then
(``OomWatch``, put in by ``hooks.py`` before the hooks that keep gpudash's frames out of the job's
tracebacks). Standard library and the job's own torch only."""

from __future__ import annotations

import contextlib
import gc
import linecache
import os
import re
import sys
import sysconfig
import threading
import warnings
from collections.abc import Callable
from typing import Any

from .memory_count import MemoryCount
from .tensor_bytes import count_kinds
from .wire import OOM

TRIED = re.compile(r"Tried to allocate ([\d.]+) (GiB|MiB|KiB|bytes|B)\b")
UNITS = {"GiB": 1 << 30, "MiB": 1 << 20, "KiB": 1 << 10, "bytes": 1, "B": 1}


class OomWatch:
    """The job dies of an out-of-memory error: before its traceback is printed (the job's own
    ``sys.excepthook`` after ours, unchanged), gpudash is told where — the job's own line, the step
    and phase, the thread where not the main one — and what the memory held then. An error the job
    catches is its own; one that ends a thread of the job's (``threading.excepthook``) is told too."""

    def __init__(
        self,
        torch: Any,
        count: MemoryCount,
        send: Callable[[dict[str, Any]], None],
        rank: Callable[[], int],
        phases: Any,  # phases.Phases: what the job does now
    ) -> None:
        self.torch, self.count, self.send, self.rank, self.phases = torch, count, send, rank, phases
        self.previous: Any = None
        self.previous_thread: Any = None

    def install(self) -> None:
        self.previous, self.previous_thread = sys.excepthook, threading.excepthook
        sys.excepthook, threading.excepthook = self._hook, self._thread_hook

    def _thread_hook(self, args: Any) -> None:
        try:
            if args.exc_value is not None and is_oom(args.exc_value):
                said = self.message(args.exc_value, args.exc_traceback)
                said["thread"] = str(getattr(args.thread, "name", "") or "a thread")[:80]
                self.send(said)
        except Exception:  # noqa: BLE001, S110 - the thread's own traceback comes all the same
            pass
        (self.previous_thread or threading.__excepthook__)(args)

    def _hook(self, kind: Any, exc: BaseException, tb: Any) -> None:
        try:
            if is_oom(exc):
                self.send(self.message(exc, tb))
        except Exception:  # noqa: BLE001, S110 - the job's own traceback comes all the same
            pass
        (self.previous or sys.__excepthook__)(kind, exc, tb)

    def where(self) -> dict[str, Any]:
        """The rank, the step under way and what the job was doing in it."""
        step = self.count.step
        return {"rank": self.rank(), "step": step + 1, "phase": phase_now(self.phases, step)}

    def message(self, exc: BaseException, tb: Any) -> dict[str, Any]:
        said = self.where()
        out: dict[str, Any] = {"k": OOM, **said, "error": str(exc).strip().splitlines()[0][:300] if str(exc) else ""}
        if (tried := TRIED.search(str(exc))) is not None:
            out["tried"] = int(float(tried[1]) * UNITS[tried[2]])
        out.update(job_line(tb))
        if not self.count.device.startswith("cuda") and "CUDA" in str(exc):  # before the first step
            with contextlib.suppress(Exception):
                self.count.device = f"cuda:{self.torch.cuda.current_device()}"
        figures = self.count.message(int(said.get("rank", 0)))
        if figures is None:  # before the first step: the optimizers found now
            self.count.kinds = count_all(self.torch)
            figures = self.count.message(int(said.get("rank", 0))) or {}
        out.update({k: v for k, v in figures.items() if k not in ("k", "rank", "step")})
        out["alloc_conf"] = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", os.environ.get("PYTORCH_ALLOC_CONF", ""))
        return out


def is_oom(exc: BaseException) -> bool:
    """torch's out-of-memory error (``torch.OutOfMemoryError``; an older torch's RuntimeError)."""
    if type(exc).__name__ == "OutOfMemoryError":
        return True
    return isinstance(exc, RuntimeError) and "out of memory" in str(exc).lower() and "CUDA" in str(exc)


def job_line(tb: Any) -> dict[str, Any]:
    """The innermost frame of the job's own files (not torch's, a library's, Python's): its file,
    line and source."""
    skip = [sysconfig.get_paths().get(k, "") for k in ("stdlib", "platstdlib", "purelib", "platlib")]
    skip.append(os.path.dirname(__file__))
    found: dict[str, Any] = {}
    while tb is not None:
        code = tb.tb_frame.f_code
        path = code.co_filename
        if not path.startswith("<") and not any(p and path.startswith(p) for p in skip) and "site-packages" not in path:
            found = {"file": path, "line": tb.tb_lineno, "function": code.co_name}
        tb = tb.tb_next
    if found:
        found["code"] = linecache.getline(found["file"], found["line"]).strip()[:200]
    return found


def count_all(torch: Any) -> dict[str, int]:
    """Parameters, gradients and state of every optimizer alive (an error before the first step)."""
    totals = {"params": 0, "grads": 0, "optimizer": 0}
    optimizer = torch.optim.Optimizer
    with warnings.catch_warnings():  # (isinstance on some of torch's module objects warns of deprecations)
        warnings.simplefilter("ignore")
        found = [thing for thing in gc.get_objects() if issubclass(type(thing), optimizer)]
    for thing in found:
        for kind, value in count_kinds(thing).items():
            totals[kind] += value
    return totals


def phase_now(phases: Any, steps: int) -> str:
    """What the job was doing: a checkpoint, an evaluation, its first step, or training."""
    if "checkpoint" in getattr(phases, "open", {}):
        return "checkpoint"
    if getattr(phases, "mode_from", None) is not None:
        return "evaluation"
    return "the first step" if steps == 0 else "training"
