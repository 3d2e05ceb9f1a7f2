"""A GPU-only profiler window's CUDA calls left unrecorded on a torch that cannot select CUPTI's kinds
(before 2.12; for ``window.py``). Standard library only.

``torch.profiler`` with ``ProfilerActivity.CUDA`` asks Kineto for CUDA's whole group: the kernels,
copies and memsets, and CUPTI's records of every CUDA runtime and driver call (about 9,300 in a
window of 5 DDP ResNet-50 steps, beside its 5,400 kernels). Once Kineto has enabled them, the window
turns the two call kinds off again in the process's own CUPTI — the library torch loaded, never a
second copy — with ``cuptiActivityDisable``: a plain call, no callback of Python's (CUPTI calls its
buffer callbacks from threads of its own, and those stay Kineto's native ones). Kineto enables them
again at its next window and disables them at its stop as usual. What it gives is the same window
on every torch — the GPU's work, no host records, as torch 2.12's selection records — not speed:
on 2 H200s a traced step with the calls' records off read 0.94× [0.75–1.18] and 0.97× [0.75–1.25]
of one with them kept, no change detected (``docs/bench/h200x2-issue74i``)."""

from __future__ import annotations

import ctypes
import os

# CUpti_ActivityKind (cupti_activity.h): the records of the CUDA driver's and runtime's calls
CUPTI_ACTIVITY_KIND_DRIVER = 4
CUPTI_ACTIVITY_KIND_RUNTIME = 5
CALL_KINDS = (CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER)


def loaded_libcupti(maps: str = "/proc/self/maps") -> str | None:
    """The path of the libcupti this process has loaded (torch's), None where it has none."""
    try:
        with open(maps, encoding="utf-8", errors="replace") as lines:
            for line in lines:
                parts = line.rstrip("\n").split(maxsplit=5)
                if len(parts) == 6 and "libcupti" in os.path.basename(parts[5]):
                    return parts[5]
    except OSError:
        return None
    return None


def calls_unrecorded(maps: str = "/proc/self/maps") -> str | None:
    """Turn CUPTI's records of CUDA calls off in this process: None when done, else why not (a line)."""
    path = loaded_libcupti(maps)
    if path is None:
        return "no libcupti loaded in the job's process"
    try:  # RTLD_NOLOAD: the copy already loaded, never a second one
        lib = ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
        disable = lib.cuptiActivityDisable
    except (OSError, AttributeError) as exc:
        return f"{os.path.basename(path)}: {exc}"
    disable.argtypes = [ctypes.c_int]
    disable.restype = ctypes.c_int
    answers = [int(disable(kind)) for kind in CALL_KINDS]
    if any(answers):
        return f"cuptiActivityDisable answered {answers} (CUPTI's error codes)"
    return None
