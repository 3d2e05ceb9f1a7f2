"""torch's private names the workloads need, in one place (an adapter allowed by
tests/test_private_apis.py). Each was checked against torch 2.14's source: none has a public
equivalent that does the same.

- ``new_shared_empty``: an uninitialised tensor allocated straight in shared memory, as
  ``default_collate`` makes its batch in a DataLoader worker (``_typed_storage()._new_shared``):
  the worker then sends it without a copy. The public ``torch.empty(...).share_memory_()``
  allocates twice and copies the uninitialised tensor into the shared memory (twice the peak
  memory; 1.3-2.5x the time, allocation and first write, for 64-256 images on the CPU here).
  Asked for in pytorch/pytorch#48558 ("tensor ctors should support directly creating in
  shared memory", open).
- ``compile_options``: ``torch.compile`` takes a ``mode`` or ``options``, never both; per-call
  options on top of a mode need the mode's own options, which only
  ``torch._inductor.list_mode_options`` gives (named in ``torch.compile``'s docstring, but in a
  private package). The options themselves (``layout_optimization`` here) are public, per call.
- ``stop_loader_workers`` / ``close_process_pipes``: a DataLoader iterator's workers can only
  be stopped by dropping the iterator (``_shutdown_workers`` at garbage collection; a public
  shutdown is asked for in pytorch/pytorch#71383, open), and its worker processes are only in
  ``_workers``. A reaped ``multiprocessing.Process`` gives its pipes back only through
  ``Process.close()``, after which ``is_alive()`` raises, and torch's exit hook still asks it:
  closing its ``_popen`` frees the pipes and leaves ``is_alive()`` answering False. No upstream
  issue found for the pipes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch


def new_shared_empty(like: torch.Tensor, size: Sequence[int]) -> torch.Tensor:
    """An uninitialised contiguous tensor of ``like``'s dtype and device, shaped ``size``, in
    shared memory (what ``default_collate`` does in a worker)."""
    storage = like._typed_storage()._new_shared(math.prod(size), device=like.device)
    return like.new(storage).resize_(size)


def compile_options(mode: str, options: dict[str, Any]) -> dict[str, Any]:
    """``torch.compile``'s ``options=`` for ``mode`` ("default", "reduce-overhead", …) with
    ``options`` (inductor config keys) on top: what ``mode=`` would set, plus these."""
    from torch._inductor import list_mode_options

    return {**list_mode_options(mode, False), **options}


def stop_loader_workers(batches: object) -> list[Any]:
    """Stop a DataLoader iterator's worker processes now (not at garbage collection) and return
    them; [] for an iterator without workers."""
    shutdown = getattr(batches, "_shutdown_workers", None)
    if shutdown is None:
        return []
    shutdown()
    return list(getattr(batches, "_workers", ()))


def close_process_pipes(process: Any) -> None:
    """Give back the pipes of a reaped ``multiprocessing.Process``; its ``is_alive()`` and
    ``exitcode`` still answer (``Process.close()`` would make them raise)."""
    popen = getattr(process, "_popen", None)
    if popen is not None:
        popen.close()
