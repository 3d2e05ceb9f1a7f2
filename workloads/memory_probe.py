"""Measuring what one training step allocates: the probe behind the batch-size memory check.

``Workload.step_memory`` runs the running variant's two stages, eagerly, on the first 1, 4 and 16
samples of the next batch (``PROBE_BATCHES``, as many as it holds) and fits ``limits.StepMemory``
to what each step took:

- the bytes of the tensors autograd saves for backward (each storage once): the activations,
  which grow with the batch and with nothing else. Their slope is the cost of a sample;
- on CUDA also the caching allocator's peak above what was allocated before the step
  (``max_memory_allocated``): activations, gradients, and workspaces that libraries take at
  some batch sizes and not at others (cuDNN's), which is why the peaks set no slope: the
  largest probe's peak sets the fixed part. On the CPU torch keeps no allocator statistics,
  so the estimate is a lower bound: backward's transient gradients come on top, and the memory
  guard (``gpudash.core.memguard``) catches what the estimate misses.

The probe trains nothing: parameters, optimizer state, gradients and every random generator
are put back afterwards.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import torch


class _DrawsRandomness(Protocol):
    def generators(self) -> Sequence[torch.Generator]: ...


PROBE_BATCHES = (1, 4, 16)  # the probe steps' batch sizes (those up to the running batch's)


def probe_sizes(batch_len: int) -> list[int]:
    """The probe batch sizes for a running batch of ``batch_len`` samples (it caps the largest)."""
    return sorted({min(n, batch_len) for n in PROBE_BATCHES})


def nbytes(batch: Any) -> int:
    """Bytes of a host batch: its tensors, in tuples or lists at any depth."""
    if isinstance(batch, torch.Tensor):
        return batch.numel() * batch.element_size()
    if isinstance(batch, (tuple, list)):
        return sum(nbytes(item) for item in batch)
    return 0


def batch_len(batch: Sequence[Any]) -> int:
    """Samples in a batch: the length of its first item."""
    return len(batch[0])


def head(batch: Sequence[Any], n: int) -> tuple[Any, ...]:
    """The first ``n`` samples of each item of a batch."""
    return tuple(item[:n] for item in batch)


def step_bytes(device: torch.device, run: Callable[[], Any]) -> tuple[int, int]:
    """What ``run()`` (one step) takes on ``device``: (its peak, the bytes saved for backward).

    The saved bytes (each storage once) are the activations, which grow with the batch and with
    nothing else; on CUDA the peak is the caching allocator's above what was allocated before
    the step (workspaces and transient gradients too), on the CPU the saved bytes again."""
    saved: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        saved[storage.data_ptr()] = storage.nbytes()
        return t

    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        run()
    activations = sum(saved.values())
    if not cuda:
        return activations, activations
    torch.cuda.synchronize(device)
    return torch.cuda.max_memory_allocated(device) - before, activations


def generators_of(owner: _DrawsRandomness, device: torch.device) -> list[torch.Generator]:
    """Every generator a step may draw from, once each: the stages' (``owner.generators()``, also
    those held by a helper object), the owner's own attributes and the defaults of its device."""
    found = [*owner.generators(), *(g for g in vars(owner).values() if isinstance(g, torch.Generator))]
    found.append(torch.default_generator)
    if device.type == "cuda":
        found.append(torch.cuda.default_generators[device.index or 0])
    out: list[torch.Generator] = []
    for g in found:
        if not any(g is seen for seen in out):
            out.append(g)
    return out


@dataclass(frozen=True)
class RandomStates:
    """The state of every generator an owner's steps and set-up draw from (``generators_of``), and
    Python's: what the probe puts back, and what a fresh start (``workloads.fresh_start``) replays."""

    generators: list[torch.Tensor]
    python: Any

    @classmethod
    def of(cls, owner: _DrawsRandomness, device: torch.device) -> RandomStates:
        return cls([g.get_state() for g in generators_of(owner, device)], random.getstate())

    def put(self, owner: _DrawsRandomness, device: torch.device) -> None:
        """Set ``owner``'s generators (and Python's) to these states."""
        for g, state in zip(generators_of(owner, device), self.generators, strict=True):
            g.set_state(state)
        random.setstate(self.python)


@contextlib.contextmanager
def gradients_kept(parameters: Sequence[torch.nn.Parameter]) -> Iterator[None]:
    """Put each parameter's ``.grad`` back afterwards (gradients accumulated over micro-steps)."""
    saved = [None if p.grad is None else p.grad.detach().clone() for p in parameters]
    try:
        yield
    finally:
        for p, grad in zip(parameters, saved, strict=False):
            p.grad = grad
