"""The waits torch's sync warning misses: ``torch.cuda.synchronize()`` and ``Event.synchronize()``.

Both make the host wait for the GPU, and neither goes through torch's sync debug mode. torch's
GPU trace reports them: ``torch._C._activate_gpu_trace()`` with
``torch.cuda._gpu_trace.register_callback_for_device_synchronization`` and
``…_event_synchronization``. That is a private API, used here and nowhere else;
``tests/test_sync_sites.py`` fails the day a torch release drops it, and without it these two
kinds are not counted (``missing`` says why, and the sync table says so).

Stream synchronizations (``.item()``, ``nonzero()``, ``Stream.synchronize()``) are left out:
torch's sync warning already reports them, and counting both would count them twice. A
non-blocking copy into pageable host memory waits too and is reported by neither.

Callbacks cannot be unregistered: one pair is registered per process, the first time, and calls
whichever handler is current (``start`` sets it, ``stop`` clears it). The trace, once activated,
stays on for the process (torch has no call to turn it off); with no handler the callbacks
return at once.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

Handler = Callable[[], None]
CALLBACKS = ("register_callback_for_device_synchronization", "register_callback_for_event_synchronization")

_handler: Handler | None = None
_registered = False


def missing(torch: Any) -> str | None:
    """Why this torch cannot report device and event synchronizations (None: it can)."""
    version = getattr(torch, "__version__", "?")
    try:
        trace = importlib.import_module("torch.cuda._gpu_trace")
    except ImportError:
        return f"torch {version} has no torch.cuda._gpu_trace"
    for name in CALLBACKS:
        if not callable(getattr(trace, name, None)):
            return f"torch {version} has no torch.cuda._gpu_trace.{name}"
    if not callable(getattr(torch._C, "_activate_gpu_trace", None)):
        return f"torch {version} has no torch._C._activate_gpu_trace"
    return None


def start(torch: Any, handler: Handler) -> str | None:
    """Call ``handler()`` in the waiting thread at each device or event synchronization from now
    on. None, or why not (the two kinds are then not counted)."""
    global _handler, _registered
    why = missing(torch)
    if why is not None:
        return why
    if not _registered:
        trace = importlib.import_module("torch.cuda._gpu_trace")
        trace.register_callback_for_device_synchronization(_on_sync)
        trace.register_callback_for_event_synchronization(_on_sync)
        torch._C._activate_gpu_trace()
        _registered = True
    _handler = handler
    return None


def stop() -> None:
    """No handler from now on (the callbacks stay registered and return at once)."""
    global _handler
    _handler = None


def _on_sync(*_args: object) -> None:
    handler = _handler
    if handler is not None:
        handler()
