"""How the workload process words its events: an exception as one line, details as plain ``str``,
progress events while a slow change (a compile, a graph capture) is under way. Torch-free."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from gpudash.core.memguard import out_of_memory_message
from gpudash.core.protocol import Event, EventKind, Message

Emit = Callable[[Message], None]
PROGRESS_EVERY_S = 2.0  # how often a slow change (compile, capture) reports that it is under way


def one_line(exc: BaseException) -> str:
    """An exception as one line for the user (a failed host allocation: "out of host memory: …")."""
    out_of_memory = out_of_memory_message(exc)
    if out_of_memory is not None:
        return out_of_memory
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    name = type(exc).__name__
    if any(cls.__name__ == "WorkloadError" for cls in type(exc).__mro__):  # ours: meant for the user as it is
        return first or name
    return f"{name}: {first}" if first else name


def plain(details: dict[str, Any]) -> dict[str, str]:
    """Details as plain ``str`` (``torch.__version__`` is a str subclass: unpickling it in the
    parent would import torch there; ``str()`` of a str subclass is an exact ``str``)."""
    return {str(k): str(v) for k, v in details.items()}


@contextmanager
def progress_reports(
    emit: Emit, now: Callable[[], float], what: str, doing: tuple[str, ...], every_s: float | None = None
) -> Iterator[None]:
    """While the body runs (a compile, a graph capture), emit a ``progress`` event every
    ``every_s`` seconds from a helper thread: "compiling… 12 s". Nothing when ``doing`` is empty."""
    if not doing:
        yield
        return
    every_s = PROGRESS_EVERY_S if every_s is None else every_s
    done = threading.Event()
    start = time.monotonic()
    label = " and ".join(dict.fromkeys(doing))

    def tick() -> None:
        while not done.wait(every_s):
            elapsed = time.monotonic() - start
            emit(Event(time_s=now(), kind=EventKind.PROGRESS, what=what, message=f"{label}… {elapsed:.0f} s"))

    thread = threading.Thread(target=tick, name="gpudash-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
