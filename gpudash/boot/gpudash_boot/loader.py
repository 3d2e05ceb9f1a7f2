"""Inside a job: the batches each ``DataLoader`` iterator hands out, seen by gpudash's hooks
(``hooks.py``): their samples and tokens,
the time the job waited inside ``__next__``, what a batch made in the job's own process (a
``DataLoader`` without workers) spent in its Dataset and in collating, and the training loader's
arguments. Standard library and the job's own torch only.

Two private names of torch: ``torch.utils.data.dataloader._BaseDataLoaderIter.__next__`` is wrapped
(every ``DataLoader`` iterator subclasses it; no public hook sees each batch:
``tests/test_private_apis.py``), and the iterator's ``_dataset_fetcher`` is timed (no public hook
sees inside a batch's making)."""

from __future__ import annotations

import collections.abc
import time
from collections.abc import Callable
from typing import Any

from . import settings as job_settings
from .frames import hidden

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

    return hidden(timed)


def _fetch_seconds(it: Any) -> tuple[float, float]:
    """(the Dataset's seconds, collation's seconds) of the batch ``it`` just handed out, and reset."""
    seconds = getattr(it, FETCH_TIMES, None)
    if not seconds:
        return 0.0, 0.0
    fetched, collated = seconds
    seconds[0] = seconds[1] = 0.0
    return max(0.0, fetched - collated), collated


class BatchWatch:
    """The batches since the last step, each iterator's apart (one per process): ``install`` wraps
    every iterator's ``__next__``; at a step the hooks read ``batches`` of ``last_iterator`` (the
    training loop's) and clear them."""

    def __init__(self, torch: Any, phases: Any, memory: Any, off: Callable[[str], None]) -> None:
        self.torch = torch
        self.phases = phases  # phases.Phases: each batch a signal of what the job does
        self.memory = memory  # memory_count.MemoryCount: the batches drawn
        self.off = off  # every hook off (a batch that cannot be read)
        self.on = True
        self.before_first = True  # the training loader's arguments are read at each batch until the first step
        # each iterator's batches since the last step: [samples, tokens, wait, the Dataset's seconds,
        # collation's seconds, bytes] (the Dataset's and collation's where this process made the batches)
        self.batches: dict[int, list[Any]] = {}
        self.last_iterator = 0  # the iterator of the latest batch: the training loop's, at a step
        self.settings: dict[str, str] = {}  # the training DataLoader's arguments, before the first step
        self.base: Any = None  # torch's base of every DataLoader iterator, once installed
        self.original: Any = None  # its own ``__next__``

    def install(self, loader_module: Any) -> None:
        self.base = loader_module._BaseDataLoaderIter
        self.original = self.base.__next__
        self.base.__next__ = hidden(self.wrap(self.original))

    def uninstall(self) -> None:
        self.on = False
        if self.original is not None:
            self.base.__next__ = self.original

    def first_step(self) -> dict[str, str]:
        """At the first step: the training loader's arguments, read no more."""
        self.before_first = False
        return self.settings

    def wrap(self, original: Any) -> Any:
        """``original`` (an iterator's ``__next__``), each batch it hands out counted."""
        watch = self
        torch = self.torch

        def __next__(it: Any) -> Any:  # noqa: N807 - the method it replaces
            if watch.on and not hasattr(it, FETCH_TIMES):
                _time_fetcher(it)
            began = time.monotonic()
            try:
                batch = original(it)
            except StopIteration:
                if watch.on:
                    watch.phases.batch(id(it), began, time.monotonic(), True)
                raise
            if watch.on:
                ended = time.monotonic()
                watch.phases.batch(id(it), began, ended, False)
                try:
                    n, tokens = samples_tokens(batch, torch)
                    size = batch_bytes(batch, torch)
                except Exception as exc:  # noqa: BLE001
                    watch.off(f"reading a batch: {type(exc).__name__}: {exc}")
                    return batch
                acc = watch.batches.setdefault(id(it), [0, 0, 0.0, 0.0, 0.0, 0])
                # its samples, tokens, wait, the Dataset's part and the collation where this process made it, bytes
                for i, value in enumerate((n, tokens, ended - began, *_fetch_seconds(it), size)):
                    acc[i] += value
                watch.last_iterator = id(it)
                watch.memory.drawn += 1
                if watch.before_first:  # the training loader's arguments, as the first step finds them
                    watch.settings = loader_settings(it)
                    job_settings.seen(it)
            return batch

        return __next__


def samples_tokens(batch: Any, torch: Any, depth: int = 0) -> tuple[int, int]:
    """(samples, tokens) of one batch: the first tensor's first dimension; a mapping's input_ids
    first (its elements are the tokens). (0, 0) when no tensor is found."""
    if isinstance(batch, torch.Tensor):
        return (int(batch.shape[0]) if batch.dim() else 1), 0
    if depth > 3:
        return 0, 0
    if isinstance(batch, collections.abc.Mapping):
        ids = batch.get("input_ids")
        if isinstance(ids, torch.Tensor) and ids.dim():
            return int(ids.shape[0]), int(ids.numel()) if ids.dim() > 1 else 0
        values: Any = batch.values()
    elif isinstance(batch, (list, tuple)):
        values = batch
    else:
        values = getattr(batch, "__dict__", {}).values()  # a dataclass or a plain object of tensors
    for value in values:
        found = samples_tokens(value, torch, depth + 1)
        if found[0]:
            return found
    return 0, 0


def batch_bytes(batch: Any, torch: Any, depth: int = 0) -> int:
    """The bytes of a batch's tensors (in tuples, lists and mappings, a few levels down): what a
    worker hands over to the training process for it."""
    if isinstance(batch, torch.Tensor):
        return int(batch.numel()) * int(batch.element_size())
    if depth >= 4:
        return 0
    if isinstance(batch, dict):
        return sum(batch_bytes(v, torch, depth + 1) for v in list(batch.values())[:64])
    if isinstance(batch, (list, tuple)):
        return sum(batch_bytes(v, torch, depth + 1) for v in batch[:64])
    return 0


def loader_settings(it: Any) -> dict[str, str]:
    """A DataLoader iterator's arguments that set its speed ({"num_workers": "0", …}) and where it
    was made ("site": "/path/train.py:39", "" where not known)."""
    names = ("num_workers", "pin_memory", "persistent_workers", "prefetch_factor")
    said = {n: str(getattr(it, "_" + n)) for n in names if hasattr(it, "_" + n)}
    return {**said, "site": str(getattr(it, "gpudash_site", "") or "")}
