"""The Workload interface that the engine drives without knowing the family."""

from __future__ import annotations

import os
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from workloads.data import HostBatchPool
from workloads.registry import (
    FamilyInfo,
    VariantInfo,
    WorkloadError,
    check_batch_size,
    check_image_size,
)
from workloads.streams import TwoStagePipeline


@dataclass(frozen=True)
class WorkloadOptions:
    """What the user chose; ``None`` means the family's default for the device."""

    variant: str | None = None
    batch_size: int | None = None
    image_size: int | None = None
    workers: int | None = None
    seed: int = 0
    # Tests only: run a pipelined variant's schedule (produce n+1, consume n) on the CPU, in order.
    emulate_streams: bool = False


def available_cpus() -> int:
    """CPUs this process may run on (the affinity mask, not the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def train_step(
    model: torch.nn.Module,
    criterion: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    inputs: torch.Tensor,
    targets: torch.Tensor,
) -> torch.Tensor:
    """One SGD step on the current stream; returns the loss, detached (no host sync)."""
    optimizer.zero_grad(set_to_none=True)
    loss = criterion(model(inputs), targets)
    loss.backward()
    optimizer.step()
    return loss.detach()


class Workload(ABC):
    """One reference training workload: build on a device, then ``step()`` repeatedly.

    ``step()`` only enqueues work: it never waits for the GPU (except where the variant's
    lesson is that it does). When it returns, every piece of the step's device work is
    ordered before anything later enqueued on the current stream, so an event recorded
    there marks the step's end, and ``last_loss`` may be read from the current stream.
    """

    info: ClassVar[FamilyInfo]
    pool: HostBatchPool | None = None
    pipeline: TwoStagePipeline | None = None

    def __init__(self, device: torch.device | str, options: WorkloadOptions) -> None:
        self.device = torch.device(device)
        if self.device.type == "cuda":
            if not torch.cuda.is_available():
                raise WorkloadError("--device cuda was asked for, but CUDA is not available here")
            if self.device.index is None:
                self.device = torch.device("cuda", torch.cuda.current_device())
        defaults = self.info.defaults(self.device.type)
        self.emulate_streams = options.emulate_streams
        self.variant, self.batch_size = self.info.default_variant, defaults.batch_size
        self.variant, self.batch_size = self.check_change(
            variant=options.variant, batch_size=options.batch_size
        )
        self.image_size = check_image_size(options.image_size or defaults.image_size)
        if options.workers is not None and options.workers < 0:
            raise WorkloadError(f"workers must be 0 or more, got {options.workers}")
        self.workers = options.workers if options.workers is not None else (
            defaults.workers if defaults.workers is not None else available_cpus()
        )
        self.seed = options.seed
        self.last_loss: torch.Tensor | None = None
        torch.manual_seed(self.seed)
        self._build_model()
        self._configure()

    # -- what a family provides --------------------------------------------------------
    @abstractmethod
    def _build_model(self) -> None:
        """Create the model(s), loss and optimizer once; they survive every reconfigure."""

    @abstractmethod
    def _configure(self) -> None:
        """(Re)build what depends on variant and batch size: data source, pipeline state."""

    @abstractmethod
    def step(self) -> None:
        """Enqueue one training step."""

    @abstractmethod
    def trained_parameters(self) -> list[torch.nn.Parameter]:
        """The parameters the optimizer updates (what equivalence tests compare)."""

    def _release(self) -> None:
        """Free what ``_configure`` built: the pinned batch pool and the pipeline's streams.

        Families with more (loader workers) extend this and call ``super()._release()``.
        """
        self.pool = None  # free the pinned batches before the next configuration builds its own
        if self.pipeline is not None:
            self.pipeline.close()
            self.pipeline = None

    # -- what the engine uses -----------------------------------------------------------
    @property
    def samples_per_step(self) -> int:
        return self.batch_size

    def describe(self) -> dict[str, object]:
        return {
            "workload": self.info.name,
            "variant": self.variant,
            "batch_size": self.batch_size,
            "image_size": self.image_size,
            "workers": self.workers,
            "device": str(self.device),
        }

    def set_batch_size(self, batch_size: int) -> None:
        self.reconfigure(batch_size=batch_size)

    def set_variant(self, variant: str) -> None:
        self.reconfigure(variant=variant)

    def reconfigure(self, *, variant: str | None = None, batch_size: int | None = None) -> None:
        """Change variant and/or batch size at a step boundary; on failure keep the old ones."""
        new_variant, new_batch = self.check_change(variant=variant, batch_size=batch_size)
        if (new_variant, new_batch) == (self.variant, self.batch_size):
            return
        old = (self.variant, self.batch_size)
        self._release()
        self.drain()
        self.variant, self.batch_size = new_variant, new_batch
        try:
            self._configure()
        except BaseException:
            self._release()
            self.variant, self.batch_size = old
            self._configure()
            raise

    def stage_pair(self) -> "tuple[tuple[str, Callable[[], Any]], tuple[str, Callable[[Any], Any]]] | None":
        """The two stages of a two-stage family, each runnable alone on a fixed batch:
        ((name, produce()), (name, consume(produced))). None: the variant has no such split."""
        return None

    def time_stages(self, steps: int = 20) -> dict[str, float]:
        """Each stage alone, ``steps`` times on the current stream: ms per call, by stage name.

        A measurement, not a training step: it synchronizes once per stage (never per step)."""
        pair = self.stage_pair()
        if pair is None:
            raise WorkloadError(f"{self.info.name}/{self.variant} has no two stages to time apart")
        (name1, produce), (name2, consume) = pair
        self.drain()
        produced = produce()
        consume(produced)  # warm-up: allocator, kernels' first launch
        return {name1: self._ms_per_call(produce, steps), name2: self._ms_per_call(lambda: consume(produced), steps)}

    def _ms_per_call(self, fn: Callable[[], Any], steps: int) -> float:
        if self.on_cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(steps):
                fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / steps
        t = time.perf_counter()
        for _ in range(steps):
            fn()
        return (time.perf_counter() - t) * 1000.0 / steps

    def drain(self) -> None:
        """Wait until every stream of the device is idle (used at reconfigure, never per step)."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def close(self) -> None:
        self._release()
        self.drain()

    def __enter__(self) -> "Workload":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- helpers -------------------------------------------------------------------------
    def check_change(self, *, variant: str | None = None, batch_size: int | None = None) -> tuple[str, int]:
        """The (variant, batch size) a change asks for, checked: the workload's one check.

        Raises a one-line WorkloadError (unknown variant, one the device cannot run, a bad
        batch size) without touching the running configuration."""
        new_variant = self.variant if variant is None else variant
        why = self.info.variant(new_variant).refusal(self.device.type)
        if why and not self.emulate_streams:
            raise WorkloadError(f"{why}; this run is on {self.device}")
        new_batch = self.batch_size if batch_size is None else check_batch_size(batch_size)
        return new_variant, new_batch

    @property
    def variant_info(self) -> VariantInfo:
        """The catalog's entry for the running variant (what the family's code asks)."""
        return self.info.variant(self.variant)

    @property
    def on_cuda(self) -> bool:
        return self.device.type == "cuda"
