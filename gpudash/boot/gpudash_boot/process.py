"""The facts of the job's process that gpudash's hooks need: its threads settled before it exits,
whether multiprocessing started it, and the backend's flags its first messages say. Standard
library only."""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any


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


def backend_settings(torch: Any) -> dict[str, str]:
    """The backend flags the job runs with ({"cudnn_benchmark": "False", "tf32": "False"})."""
    try:
        tf32 = bool(torch.backends.cuda.matmul.allow_tf32) or torch.get_float32_matmul_precision() != "highest"
        return {"cudnn_benchmark": str(bool(torch.backends.cudnn.benchmark)), "tf32": str(tf32)}
    except Exception:  # noqa: BLE001 - a torch without these: nothing said
        return {}


def multiprocessing_child() -> bool:
    """A process started by multiprocessing (a DataLoader worker, mp.spawn): it says hello only
    once it steps an optimizer."""
    argv = getattr(sys, "orig_argv", sys.argv)
    return any("multiprocessing" in a for a in argv)
