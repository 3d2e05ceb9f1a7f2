"""What a thread costs beside a training loop: CPython's collections inside timed stretches
(``CollectionCount``) and one thread's CPU time inside NVML's C calls (``NvmlCallTime``)."""

from __future__ import annotations

import contextlib
import gc
import threading
import time
from collections.abc import Iterator
from typing import Any


class CollectionCount:
    """CPython's cyclic collections (by generation) that run inside the timed stretches, by arm.

    A round of the ABBA design makes and closes a tracker (threads, files, NVML): what that
    allocates brings the collector's next full collection closer, and one landing in a 0.1 s
    stretch costs it tens of ms. A job makes one tracker, so each stretch starts after a
    ``gc.collect()``, and this says how many collections still landed in each arm."""

    def __init__(self) -> None:
        self.arm: str | None = None
        self.counts: dict[str, list[int]] = {"bare": [0, 0, 0], "tracked": [0, 0, 0]}
        gc.callbacks.append(self.seen)

    @contextlib.contextmanager
    def during(self, arm: str) -> Iterator[None]:
        self.arm = arm
        try:
            yield
        finally:
            self.arm = None

    def seen(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start" and self.arm is not None:
            self.counts[self.arm][info["generation"]] += 1

    def summary(self) -> str:
        return "; ".join(
            f"{arm} " + ", ".join(f"gen{g} {n}" for g, n in enumerate(counts)) for arm, counts in self.counts.items()
        )


class NvmlCallTime:
    """The CPU time one thread spends inside NVML's C functions, while the block runs.

    pynvml calls the library through ``ctypes.CDLL``, which releases the GIL for the call: a
    thread in there takes nothing from the training thread but a core (of many). Each function
    pointer pynvml has looked up (its cache) is wrapped for the block; the wrapper's own Python
    counts outside, on the side of the GIL (a ceiling stays a ceiling)."""

    def __init__(self, thread: Any) -> None:
        self.thread = thread
        self.seconds = 0.0
        self.saved: tuple[Any, dict[str, Any]] | None = None

    def __enter__(self) -> NvmlCallTime:
        try:
            import pynvml
        except ImportError:
            return self
        cache: dict[str, Any] = pynvml._nvmlGetFunctionPointer_cache  # noqa: SLF001 - instrumenting
        lookup = pynvml._nvmlGetFunctionPointer  # noqa: SLF001
        self.saved = (lookup, dict(cache))
        for name, fn in cache.items():
            cache[name] = TimedCall(fn, self)

        def timed_lookup(name: str) -> Any:
            fn = lookup(name)
            if name in cache and cache[name] is fn and not getattr(fn, "gpudash_timed", False):
                cache[name] = fn = TimedCall(fn, self)
            return fn

        pynvml._nvmlGetFunctionPointer = timed_lookup  # noqa: SLF001
        return self

    def __exit__(self, *exc: object) -> None:
        if self.saved is not None:
            import pynvml

            lookup, cache = self.saved
            pynvml._nvmlGetFunctionPointer = lookup  # noqa: SLF001
            pynvml._nvmlGetFunctionPointer_cache.clear()  # noqa: SLF001
            pynvml._nvmlGetFunctionPointer_cache.update(cache)  # noqa: SLF001


class TimedCall:
    """A ctypes function that adds its CPU time in one thread to ``owner.seconds``; attributes
    (``restype``: pynvml sets one) go to the function itself."""

    gpudash_timed = True

    def __init__(self, fn: Any, owner: NvmlCallTime) -> None:
        object.__setattr__(self, "fn", fn)
        object.__setattr__(self, "owner", owner)

    def __call__(self, *args: Any) -> Any:
        owner = self.owner
        if threading.current_thread() is not owner.thread:
            return self.fn(*args)
        t = time.thread_time()
        try:
            return self.fn(*args)
        finally:
            owner.seconds += time.thread_time() - t

    def __getattr__(self, name: str) -> Any:
        return getattr(self.fn, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self.fn, name, value)
