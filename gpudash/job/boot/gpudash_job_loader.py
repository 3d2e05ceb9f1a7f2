"""Inside a job: what a batch made in the job's own process (a ``DataLoader`` without workers)
spends in its Dataset and in collating, timed per batch for gpudash's hooks
(``gpudash_job_hooks.py``, which imports this file from the same folder). The one private name of
torch it touches is the iterator's ``_dataset_fetcher``: no public hook sees inside a batch's
making. Standard library only."""

from __future__ import annotations

import time
from typing import Any

FETCH_TIMES = "_gpudash_fetch_s"  # an iterator's [Dataset seconds, collation seconds] of its latest batch


def _time_fetcher(it: Any) -> None:
    """A loader without workers makes its batches in this process: its fetcher's ``fetch`` (the
    Dataset's ``__getitem__`` calls, then the collation) and ``collate_fn`` are timed, per batch,
    on the iterator (torch's private ``_dataset_fetcher``: no public hook sees inside a batch).
    With workers, nothing here: the batches are made elsewhere."""
    seconds = [0.0, 0.0]
    try:  # never the job's loop: a batch untimed still counts
        setattr(it, FETCH_TIMES, seconds)
        fetcher = getattr(it, "_dataset_fetcher", None)
        if fetcher is None or not callable(getattr(fetcher, "fetch", None)):
            return
        fetcher.fetch = _timed(fetcher.fetch, seconds, 0)
        collate = getattr(fetcher, "collate_fn", None)
        if callable(collate):
            fetcher.collate_fn = _timed(collate, seconds, 1)
    except Exception:  # noqa: BLE001, S110 - an iterator that takes no attribute: its batches untimed
        pass


def _timed(call: Any, seconds: list[float], slot: int) -> Any:
    """``call``, its seconds added to ``seconds[slot]`` each time, however it ends."""

    def timed(arg: Any) -> Any:
        began = time.monotonic()
        try:
            return call(arg)
        finally:
            seconds[slot] += time.monotonic() - began

    return timed


def _fetch_seconds(it: Any) -> tuple[float, float]:
    """(the Dataset's seconds, collation's seconds) of the batch ``it`` just handed out, and reset."""
    seconds = getattr(it, FETCH_TIMES, None)
    if not seconds:
        return 0.0, 0.0
    fetched, collated = seconds
    seconds[0] = seconds[1] = 0.0
    return max(0.0, fetched - collated), collated
