"""torch's functions in a job's call stack that gpudash's hooks (``hooks.py``) wrap, each calling
the original as it was called, none leaving a frame in the job's tracebacks (``frames.hidden``): a
Ctrl-C inside ``loss.backward()`` reads as bare. Standard library and the job's own torch only.

- ``torch.autograd.backward`` (``Tensor.backward`` calls it): each pass's start and end told (the
  step counting, the one-off measurements), and where syncs are counted, backward's own — on
  threads torch prints their warnings from — are not;
- ``torch.autograd.grad``, where syncs are counted: its own are not (as backward's); wrapped only
  then (on the CPU nothing is counted, and nothing is wrapped);
- ``torch.distributed.destroy_process_group``: a profiler window still open is closed first.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from typing import Any

from .frames import hidden


def wrap_backward(
    torch: Any, starts: Callable[[Any], None], ends: Callable[[], None], quiet: Callable[[], Any]
) -> None:
    """``starts(tensors)`` before each pass, ``ends()`` after it (not when it raises), the pass inside
    ``quiet()``."""
    original = torch.autograd.backward

    @functools.wraps(original)
    def backward(*args: Any, **kwargs: Any) -> Any:
        starts(args[0] if args else kwargs.get("tensors"))
        with quiet():
            done = original(*args, **kwargs)
        ends()
        return done

    torch.autograd.backward = hidden(backward)


def quiet_grad(torch: Any, quiet: Callable[[], Any]) -> None:
    """``torch.autograd.grad`` inside ``quiet()``."""
    original = torch.autograd.grad

    @functools.wraps(original)
    def grad(*args: Any, **kwargs: Any) -> Any:
        with quiet():
            return original(*args, **kwargs)

    torch.autograd.grad = hidden(grad)


def close_first(torch: Any, close: Callable[[], None]) -> None:
    """``destroy_process_group`` calls ``close()`` first (its failure left unsaid)."""
    dist = getattr(torch, "distributed", None)
    if dist is None or not dist.is_available() or not hasattr(dist, "destroy_process_group"):
        return
    destroy = dist.destroy_process_group

    @functools.wraps(destroy)
    def destroy_process_group(*args: Any, **kwargs: Any) -> Any:
        with contextlib.suppress(Exception):
            close()
        return destroy(*args, **kwargs)

    dist.destroy_process_group = hidden(destroy_process_group)
