"""The change checks of a workload: a change of variant, batch size or knobs is checked against the
catalog (the variant, the knobs, the family's batch limits) and, when it grows a batch already built,
against the memory a step measures (``workloads.memory_probe``, ``workloads.limits``), before anything
of the running configuration is touched. ``Workload`` (``workloads.base``) takes them from here."""

from __future__ import annotations

import contextlib
import functools
from typing import TYPE_CHECKING, Any, ClassVar

import torch

from workloads import limits, memory_probe
from workloads.catalog_types import FamilyInfo, WorkloadError
from workloads.data import pool_bytes_held
from workloads.knobs import Knobs
from workloads.registry import check_batch_size

if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Callable, Iterator, Sequence
    from contextlib import AbstractContextManager


class ChangeChecks:
    """``check_change`` and the limits it applies. The rest of the workload (``workloads.base.Workload``)
    provides the running configuration, its next input and stages, and the probe's restore point."""

    if TYPE_CHECKING:  # pragma: no cover - what this part reads of the workload
        info: ClassVar[FamilyInfo]
        device: torch.device
        variant: str
        batch_size: int
        knobs: Knobs
        emulate_streams: bool

        @property
        def world_size(self) -> int: ...
        @property
        def on_cuda(self) -> bool: ...

        _consume: Callable[..., Any] | None
        _step_memory: dict[tuple[str, Knobs], limits.StepMemory]

        def _peek_input(self) -> tuple[torch.Tensor, ...]: ...
        def generators(self) -> Sequence[torch.Generator]: ...
        def _stages(self) -> Any: ...
        def _eager_modules(self) -> AbstractContextManager[Any]: ...
        def _restore_point(self, generators: Sequence[torch.Generator]) -> AbstractContextManager[None]: ...

    def check_change(
        self, *, variant: str | None = None, batch_size: int | None = None, knobs: Knobs | None = None
    ) -> tuple[str, int, Knobs]:
        """The (variant, batch size, knobs) a change asks for, checked: the workload's one check.

        Raises a one-line WorkloadError (unknown variant, one the device cannot run, a bad
        batch size, a knob that does not apply) without touching the running configuration."""
        new_variant = self.variant if variant is None else variant
        info = self.info.variant(new_variant)
        why = info.refusal(self.device.type)
        if why and not self.emulate_streams:
            raise WorkloadError(f"{why}; this run is on {self.device}")
        new_batch = self.batch_size if batch_size is None else check_batch_size(batch_size)
        new_knobs = self.knobs if knobs is None else knobs
        why = new_knobs.refusal(info, self.device.type, self.world_size)
        if why:
            raise WorkloadError(why)
        if batch_size is not None:
            self._check_batch_limits(new_batch)
        return new_variant, new_batch, new_knobs

    def _check_batch_limits(self, batch_size: int) -> None:
        """Refuse a batch over the family's fixed limits (dataset, hard cap: before anything is
        built) or, when it grows a configuration already built, one that would not fit in memory."""
        why = self.info.batch_refusal(batch_size, self.world_size)
        if why is None and batch_size > self.batch_size and self._consume is not None:
            why = self.memory_refusal(batch_size)
        if why:
            raise WorkloadError(why)

    def memory_refusal(self, batch_size: int) -> str | None:
        """Why ``batch_size`` would not fit in memory, or None; measured on the running configuration.

        Host: the batches held at once (``host_bytes_held``: the pinned pool, a loader's
        prefetched batches), plus on the CPU the step's memory, against ``limits.host_room()``
        (MemAvailable, or what the memory guard leaves) plus what the running batches free.
        GPU: the step's memory against free plus cached-but-unused memory. The step's memory is
        ``step_memory()``'s line, fitted at small batches and scaled linearly; each may use
        ``limits.MEMORY_MARGIN`` of its room."""
        batch = self._peek_input()
        sample = memory_probe.nbytes(batch) / memory_probe.batch_len(batch)
        step = self.step_memory()
        held = self.host_bytes_held(round(sample * batch_size))
        host_need = held + (0.0 if self.on_cuda else step.at(batch_size))
        room = limits.host_room()
        if room is not None:
            free = room[0] + self.host_bytes_held(round(sample * self.batch_size))
            if host_need > limits.MEMORY_MARGIN * free:
                parts = f"batches held {limits.size(held)}"
                if not self.on_cuda:
                    parts += f" + step {limits.size(step.at(batch_size))}, {step.how()}"
                need = limits.size(host_need)
                return f"batch {batch_size} needs about {need} of host memory ({parts}); {limits.size(free)} {room[1]}"
        if self.on_cuda:
            free_now, _ = torch.cuda.mem_get_info(self.device)
            free = free_now + torch.cuda.memory_reserved(self.device) - torch.cuda.memory_allocated(self.device)
            if step.at(batch_size) > limits.MEMORY_MARGIN * free:
                return (
                    f"batch {batch_size} needs about {limits.size(step.at(batch_size))} of GPU memory "
                    f"({step.how()}); {limits.size(free)} free on {self.device}"
                )
        return None

    def host_bytes_held(self, batch_bytes: int) -> int:
        """Host bytes the configuration keeps for batches of ``batch_bytes`` (a family with a
        loader says its own): here a seeded pool, pinned on CUDA."""
        return pool_bytes_held(batch_bytes, pin=self.on_cuda)

    def step_memory(self) -> limits.StepMemory:
        """What a step of the running variant and knobs allocates, fitted from probe steps
        (``workloads.memory_probe``) on the first 1, 4 and 16 samples of the next batch, after one
        unmeasured step (the optimizer's state and the libraries' workspaces are made once).

        The stages run eagerly (no compiled module, no captured graph: conservative) and train
        nothing. Measured once per variant and knobs."""
        key = (self.variant, self.knobs)
        if key not in self._step_memory:
            with self._eager_probe() as (batch, run):
                sizes = memory_probe.probe_sizes(memory_probe.batch_len(batch))

                def step(n: int) -> Any:
                    return run(*memory_probe.head(batch, n))

                step(sizes[0])  # unmeasured: what a first step creates once (optimizer state, workspaces)
                measured = [memory_probe.step_bytes(self.device, functools.partial(step, n)) for n in sizes]
            peaks, activations = ([float(m[i]) for m in measured] for i in (0, 1))
            self._step_memory[key] = limits.StepMemory.fit(sizes, peaks, activations)
        return self._step_memory[key]

    @contextlib.contextmanager
    def probe_step(self) -> Iterator[Callable[[], Any]]:
        """One step of the running configuration on the next batch, to run once inside (a FLOP count,
        ``gpudash.boot.gpudash_boot.flop_count``): the stages run eagerly (no compiled module, no captured graph) and
        train nothing — the parameters, optimizer state and generators are put back on leaving, as
        ``step_memory``'s probe steps do."""
        with self._eager_probe() as (batch, run):
            yield lambda: run(*batch)

    @contextlib.contextmanager
    def _eager_probe(self) -> Iterator[tuple[Any, Callable[..., Any]]]:
        """The next batch and the running configuration's stages as one call, run eagerly (no
        compiled module, no captured graph) and training nothing: the parameters, optimizer state
        and generators are put back on leaving."""
        batch = self._peek_input()
        produce, consume = self._stages()

        def run(*args: Any) -> Any:
            return consume[1](*(produce[1](*args) if produce is not None else args))

        with self._eager_modules(), self._restore_point(memory_probe.generators_of(self, self.device)):
            yield batch, run
