"""The CUDA caching allocator's history — the one place gpudash calls torch's private memory-history
API (``torch.cuda.memory._record_memory_history``, ``_snapshot``: documented in "Understanding CUDA
Memory Usage", with no public name yet). Duck-typed over the torch it is given, no torch import:
used by the job's hooks (``memory_history.py``) and by gpudash's own step loop
(``gpudash/engine/memory_window.py``)."""

from __future__ import annotations

from typing import Any

MAX_ENTRIES = 1_000_000  # allocations and frees kept: the history's ring (a few hundred bytes each)


def start(torch: Any) -> None:
    """Record each allocation with its stack, from now: Python's and C++'s (the C++ frames name the
    autograd node of an allocation on backward's engine thread, which has no Python frame; reading
    their symbols takes about a second at the first snapshot); frees without one (cheaper)."""
    torch.cuda.memory._record_memory_history(enabled="all", context="alloc", stacks="all", max_entries=MAX_ENTRIES)


def stop(torch: Any) -> None:
    """Stop recording; the history is dropped."""
    torch.cuda.memory._record_memory_history(enabled=None)


def snapshot(torch: Any) -> dict[str, Any]:
    """The allocator's segments and each device's history: plain dicts, lists, strings and numbers."""
    return dict(torch.cuda.memory._snapshot())


def recording(torch: Any) -> bool:
    """Someone (the job itself) records the history already: its trace holds entries."""
    return any(snapshot(torch).get("device_traces") or [])
