"""The waits torch's sync warning misses: ``torch.cuda.synchronize()`` and ``Event.synchronize()``.

Both make the host wait for the GPU, and neither goes through torch's sync debug mode. While a
counter runs, ``start`` puts a thin wrapper in place of each (``torch.cuda.synchronize`` and
``torch.cuda.Event.synchronize``) that reports the call, then makes it; ``stop`` puts the
originals back. Nothing else is touched: a step that never calls them pays nothing. (torch's GPU
trace, ``torch._C._activate_gpu_trace``, reports them too, but it is a private API, it cannot be
turned off again, and once on it calls into Python at every allocation of the caching allocator.)

What this does not see: a reference taken before ``start`` (``from torch.cuda import
synchronize`` at import time, in a module that then calls ``synchronize()``), and torch's own C++
calls. Stream synchronizations (``.item()``, ``nonzero()``, ``Stream.synchronize()``) are left to
torch's sync warning, which reports them. A non-blocking copy into pageable host memory waits too
and is reported by neither.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

Handler = Callable[[], None]

_handlers: list[Handler] = []  # the counters running, the latest last: it is the one called
_originals: dict[str, Any] = {}  # "synchronize" / "Event.synchronize": what was there before start()


def missing(torch: Any) -> str | None:
    """Why this torch's two explicit waits cannot be counted (None: they can)."""
    cuda = getattr(torch, "cuda", None)
    version = getattr(torch, "__version__", "?")
    if not callable(getattr(cuda, "synchronize", None)):
        return f"torch {version} has no torch.cuda.synchronize"
    if not callable(getattr(getattr(cuda, "Event", None), "synchronize", None)):
        return f"torch {version} has no torch.cuda.Event.synchronize"
    return None


def start(torch: Any, handler: Handler) -> str | None:
    """Call ``handler()`` (in the waiting thread, before the wait) at each ``torch.cuda.synchronize()``
    and ``Event.synchronize()`` from now until ``stop(torch, handler)``; a later ``start`` takes
    over until its own ``stop``. None, or why not."""
    why = missing(torch)
    if why is not None:
        return why
    cuda = torch.cuda
    if not _originals:
        _originals["synchronize"] = cuda.synchronize
        _originals["Event.synchronize"] = cuda.Event.synchronize
        cuda.synchronize = _reporting(cuda.synchronize)
        cuda.Event.synchronize = _reporting(cuda.Event.synchronize)
    _handlers.append(handler)
    return None


def stop(torch: Any, handler: Handler) -> None:
    """``handler`` no longer called; the originals back in place once no counter runs."""
    if handler in _handlers:
        _handlers.remove(handler)
    if _originals and not _handlers:
        torch.cuda.synchronize = _originals.pop("synchronize")
        torch.cuda.Event.synchronize = _originals.pop("Event.synchronize")


def _reporting(wait: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(wait)
    def reported(*args: Any, **kwargs: Any) -> Any:
        if _handlers:
            _handlers[-1]()
        return wait(*args, **kwargs)

    return reported
