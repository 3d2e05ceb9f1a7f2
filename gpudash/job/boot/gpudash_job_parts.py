"""What several of gpudash's hooks' parts inside a job share (``gpudash_job_hooks.py`` and its
neighbours, which import this file from the same folder): gpudash's torch-free modules loaded from
their files, the process's threads settled before it exits, and the facts of the process its first
messages say (a multiprocessing child, the backend's flags). Standard library only."""

from __future__ import annotations

import importlib.util
import os
import sys
import threading
import time
from typing import Any

from gpudash_job_wire import SRC_ENV  # type: ignore[import-not-found]  # beside this file


def load_source(name: str, relative: str) -> Any:
    """One of gpudash's torch-free modules, from its file (the job's Python need not have gpudash)."""
    path = os.path.join(os.environ.get(SRC_ENV, ""), relative)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def settle_threads(limit_s: float = 0.25) -> None:
    """Wait, at most ``limit_s``, until no other thread of this process is runnable. A process
    group's worker thread (gloo's) drops its last work just after the job's wait on it returned;
    if the interpreter is finalizing by then, the work's Python state cannot be released and the
    process aborts ("terminate called without an active exception", pytorch/pytorch#190489) —
    bare too, on a loaded machine, where the job's exit outruns that thread. Linux only."""
    me = threading.get_native_id()
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        try:
            runnable = any(_runnable(int(tid)) for tid in os.listdir("/proc/self/task") if int(tid) != me)
        except (OSError, ValueError):
            return
        if not runnable:
            return
        time.sleep(0.005)


def _runnable(tid: int) -> bool:
    try:
        with open(f"/proc/self/task/{tid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] == b"R"
    except OSError:  # it ended
        return False


def backend_settings(torch: Any) -> str:
    """The backend flags the job runs with ("cudnn_benchmark=False,tf32=False")."""
    try:
        tf32 = bool(torch.backends.cuda.matmul.allow_tf32) or torch.get_float32_matmul_precision() != "highest"
        return f"cudnn_benchmark={bool(torch.backends.cudnn.benchmark)},tf32={tf32}"
    except Exception:  # noqa: BLE001 - a torch without these: nothing said
        return ""


def multiprocessing_child() -> bool:
    """A process started by multiprocessing (a DataLoader worker, mp.spawn): it says hello only
    once it steps an optimizer."""
    argv = getattr(sys, "orig_argv", sys.argv)
    return any("multiprocessing" in a for a in argv)
