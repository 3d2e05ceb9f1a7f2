"""The Workload interface that the engine drives without knowing the family."""

from __future__ import annotations

import contextlib
import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch

from workloads import distributed, limits, memory_probe, tuning
from workloads.catalog_types import FamilyInfo, VariantInfo, WorkloadError
from workloads.change_checks import ChangeChecks
from workloads.data import HostBatchPool
from workloads.distributed import RankInfo
from workloads.knobs import OFF, Knobs
from workloads.memory_release import MemoryRelease
from workloads.registry import check_image_size
from workloads.stage_steps import StageSteps
from workloads.stage_timing import StageTiming
from workloads.streams import TwoStagePipeline
from workloads.train_step import GradientAccumulation

COPY_STAGE = "copy"  # a first stage that only copies the batch to the device (never graphed)


@dataclass(frozen=True)
class WorkloadOptions:
    """What the user chose; ``None`` means the family's default for the device."""

    variant: str | None = None
    batch_size: int | None = None
    image_size: int | None = None
    workers: int | None = None
    seed: int = 0
    knobs: Knobs = field(default_factory=Knobs)
    # Tests only: run a pipelined variant's schedule (produce n+1, consume n) on the CPU, in order.
    emulate_streams: bool = False
    # This process's rank in a data-parallel run (workloads.distributed); None: one process.
    distributed: RankInfo | None = None


def available_cpus() -> int:
    """CPUs this process may run on (the affinity mask, not the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


class Workload(StageSteps, MemoryRelease, ChangeChecks, StageTiming, ABC):
    """One reference training workload: build on a device, then ``step()`` repeatedly.

    ``step()`` only enqueues work: it never waits for the GPU (except where the variant's
    lesson is that it does). When it returns, every piece of the step's device work is
    ordered before anything later enqueued on the current stream, so an event recorded
    there marks the step's end, and ``last_loss`` may be read from the current stream.

    A family gives its step as one or two *stages* (``_stages``): an optional producer
    (host batch → device tensors: encode, augment) and a consumer (the training step). The
    step runs them in order, or overlapped on two streams for a pipelined variant, each as
    the knobs run it (``workloads.tuning``).
    """

    info: ClassVar[FamilyInfo]
    # Attribute names of the model modules the model knobs (channels_last, compile) apply to.
    knob_modules: ClassVar[tuple[str, ...]] = ("model",)
    # The attribute name of the module the optimizer trains (wrapped in DDP in a data-parallel run).
    trained_module: ClassVar[str] = "model"
    pool: HostBatchPool | None = None
    pipeline: TwoStagePipeline | None = None
    _consume: Callable[..., Any] | None = None  # the training stage, once a configuration is built
    _memory_format: torch.memory_format = torch.contiguous_format  # the weights' layout: as built, then the knobs'
    optimizer: torch.optim.Optimizer

    def __init__(self, device: torch.device | str, options: WorkloadOptions | None = None) -> None:
        options = options or WorkloadOptions()
        self.device = torch.device(device)
        self.rank_info = options.distributed
        if self.device.type == "cuda":
            if not torch.cuda.is_available():
                raise WorkloadError("--device cuda was asked for, but CUDA is not available here")
            if self.device.index is None:
                self.device = torch.device("cuda", torch.cuda.current_device())
        defaults = self.info.defaults(self.device.type)
        self.emulate_streams = options.emulate_streams
        self.variant, self.batch_size, self.knobs = self.info.default_variant, defaults.batch_size, Knobs()
        self.variant, self.batch_size, self.knobs = self.check_change(
            variant=options.variant, batch_size=options.batch_size, knobs=options.knobs
        )
        self.image_size = check_image_size(options.image_size or defaults.image_size)
        if options.workers is not None and options.workers < 0:
            raise WorkloadError(f"workers must be 0 or more, got {options.workers}")
        self.workers = (
            options.workers
            if options.workers is not None
            else (defaults.workers if defaults.workers is not None else self.cpus_per_rank())
        )
        self.seed = options.seed
        self.last_loss: torch.Tensor | None = None
        self._pushback: tuple[torch.Tensor, ...] | None = None  # a batch peeked at for warm-up
        self._produce: Callable[..., Any] | None = None
        self._consume: Callable[..., Any] | None = None
        self._stage_names: tuple[str | None, str] = (None, "")
        # While set (a profiler window), each stage runs inside record_function(prefix + stage name),
        # so a trace can tell whose kernels are whose. None: no annotation, no cost.
        self.annotate_stages: str | None = None
        self._step_memory: dict[tuple[str, Knobs], limits.StepMemory] = {}  # probes, per variant and knobs
        torch.manual_seed(self.seed)
        self._build_model()
        self._modules = tuning.ModuleKnobs({name: getattr(self, name) for name in self.knob_modules})
        self._first_setup(defaults.batch_size)

    # -- what a family provides --------------------------------------------------------
    @abstractmethod
    def _build_model(self) -> None:
        """Create the model(s), loss and optimizer once; they survive every reconfigure."""

    @abstractmethod
    def _configure(self) -> None:
        """(Re)build what depends on variant and batch size: data source, pipeline state."""

    @abstractmethod
    def _draw_input(self) -> tuple[torch.Tensor, ...]:
        """The next host batch (the first stage's arguments)."""

    @abstractmethod
    def _stages(self) -> tuple[tuple[str, Callable[..., Any]] | None, tuple[str, Callable[..., Any]]]:
        """(producer or None, consumer), each (name, function) for the running variant.

        The producer takes the host batch and returns device tensors (it does its own copies);
        the consumer takes those (or the host batch) and returns the loss."""

    @abstractmethod
    def trained_parameters(self) -> list[torch.nn.Parameter]:
        """The parameters the optimizer updates (what equivalence tests compare)."""

    def generators(self) -> Sequence[torch.Generator]:
        """Device generators the stages draw from (a captured graph must register them)."""
        return ()

    def _release(self) -> None:
        """Free what ``_configure`` built: the pinned batch pool and the pipeline's streams.

        Families with more (loader workers) extend this and call ``super()._release()``.
        """
        self.pool = None  # the batches stay in _kept_pool: host_pool frees them if the next configuration differs
        self._pushback = None
        self._produce = self._consume = None  # drops captured graphs with their memory
        if self.pipeline is not None:
            self.pipeline.close()
            self.pipeline = None
        # The last step's gradients lie in segments of the stream that computed them; freed by
        # the next configuration's first step, they would stay cached for a stream it may never
        # use (188 MiB after encdec pipelined → serial on an H100, docs/soak-gpu.md). Nothing
        # reads them across a change (a step sets them to None before its backward; a new DDP
        # wrapper starts its accumulation over), so they go now, before the cache is emptied.
        for p in self.trained_parameters():
            p.grad = None

    # -- knobs ---------------------------------------------------------------------------
    def autocast(self) -> contextlib.AbstractContextManager:
        """The context each forward runs in (bf16 autocast under ``amp=bf16``)."""
        return self._autocast()

    def to_device(self, tensors: Sequence[torch.Tensor]) -> tuple[torch.Tensor, ...]:
        """Copy a batch to the device on the current stream, in the knobs' memory format."""
        return tuning.to_device(tensors, self.device, self.memory_format)

    @property
    def memory_format(self) -> torch.memory_format:
        """The 4-D layout the knobs ask for (channels_last or contiguous), fixed at each setup."""
        return self._memory_format

    def _first_setup(self, known_to_fit: int) -> None:
        """Build the first configuration. A batch over ``known_to_fit`` (the family's default)
        is built there first and then grown through ``reconfigure``, whose memory check
        measures a step before the large batch is allocated."""
        asked = self.batch_size
        if asked <= known_to_fit:
            self._setup()
            return
        self.batch_size = known_to_fit
        self._setup(warm_up=False)
        try:
            self.reconfigure(batch_size=asked)
        except BaseException:
            self.close()
            raise

    def _setup(self, warm_up: bool = True) -> None:
        """Apply the knobs, build the configuration, wire the stages, warm up what is slow."""
        self.random_at_setup = memory_probe.RandomStates.of(self, self.device)  # what a fresh start puts back first
        tuning.apply_backend_flags(self.knobs)
        self._autocast = tuning.autocast_factory(self.device, self.knobs)
        layout = tuning.memory_format(self.knobs)
        relaid, self._memory_format = layout != self._memory_format, layout  # read by to_device at every step
        for name, module in self._modules.resolve(self.knobs).items():
            setattr(self, name, module)
        if relaid:  # the weights were converted after the change emptied the cache: their old copies go too
            tuning.match_state_layout(self.optimizer)
            self._empty_cache()
        if self.rank_info is not None:
            self._wrap_in_ddp()
        self._configure()
        produce, consume = self._stages()
        gens = self.generators()
        self._stage_names = (produce[0] if produce else None, consume[0])
        # A stage that only copies the batch to the device (copy-ahead) has no kernels to capture:
        # its copies already go on the stage's stream, a graph would only add two more.
        produce_knobs = self.knobs.with_value("cuda_graph", OFF) if produce and produce[0] == COPY_STAGE else self.knobs
        self._produce = tuning.stage(produce[1], self.device, produce_knobs, gens) if produce else None
        self._consume = tuning.stage(consume[1], self.device, self.knobs, gens)
        if warm_up:
            self.warm_up()

    def _wrap_in_ddp(self) -> None:
        """The trained module in DDP, with the ``ddp_*`` knobs' settings (a fresh wrapper per setup)."""
        knobs = self.knobs
        module = getattr(self, self.trained_module)  # the plain (or knob-resolved) module: in knob_modules
        bucket = knobs.value("ddp_bucket_mb")
        ddp = distributed.wrap(
            module,
            self.device,
            distributed.DdpSettings.chosen(
                bucket_mb=None if bucket == "off" else float(bucket), torch_defaults=knobs.on("ddp_torch_defaults")
            ),
        )
        accumulate = knobs.value("ddp_no_sync")
        ddp.accumulation = GradientAccumulation(int(accumulate)) if accumulate != "off" else None  # type: ignore[assignment]  # Module.__setattr__'s stub: Tensor | Module only
        setattr(self, self.trained_module, ddp)

    # -- what the engine uses -----------------------------------------------------------
    @property
    def samples_per_step(self) -> int:
        """Samples one step trains: the batch, on every data-parallel rank (the global batch)."""
        return self.batch_size * self.world_size

    def describe(self) -> dict[str, object]:
        return {
            "workload": self.info.name,
            "variant": self.variant,
            "batch_size": self.batch_size,
            "image_size": self.image_size,
            "workers": self.workers,
            "device": str(self.device),
            "knobs": self.knobs.text(),
        }

    def set_batch_size(self, batch_size: int) -> None:
        self.reconfigure(batch_size=batch_size)

    def set_variant(self, variant: str) -> None:
        self.reconfigure(variant=variant)

    def set_knob(self, name: str, value: str) -> None:
        self.reconfigure(knobs=self.knobs.with_value(name, value))

    def reconfigure(
        self, *, variant: str | None = None, batch_size: int | None = None, knobs: Knobs | None = None
    ) -> None:
        """Change variant, batch size and/or knobs at a step boundary; on failure keep the old ones."""
        new = self.check_change(variant=variant, batch_size=batch_size, knobs=knobs)
        old = (self.variant, self.batch_size, self.knobs)
        if new == old:
            return
        self._release_and_drain()
        self.variant, self.batch_size, self.knobs = new
        try:
            self._setup()
        except BaseException:
            self._release_and_drain()
            self.variant, self.batch_size, self.knobs = old
            self._setup()
            raise

    def restart(self) -> None:
        """Build the running configuration again: its batches start from the first, as a fresh
        build's do (the compiled modules, kept per module and mode, are reused)."""
        self._release_and_drain()
        self._setup()

    def model_modules(self) -> dict[str, torch.nn.Module]:
        """The model modules as built (not compiled, not wrapped), by attribute name."""
        return dict(self._modules.eager)

    def __enter__(self) -> Workload:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- helpers -------------------------------------------------------------------------
    @contextlib.contextmanager
    def _restore_point(self, generators: Sequence[torch.Generator]) -> Iterator[None]:
        """Steps run inside leave no trace: the parameters, the optimizer's state, the gradients
        (accumulated over ``ddp_no_sync`` micro-steps), the accumulation's position and
        ``generators`` are put back afterwards (warm-up, single-rank timing, the memory probe)."""
        params = self.trained_parameters()
        accumulation: GradientAccumulation | None = getattr(
            getattr(self, self.trained_module, None), "accumulation", None
        )
        position = accumulation.position if accumulation is not None else 0
        with memory_probe.gradients_kept(params), tuning.restore_point(params, self.optimizer, generators):
            try:
                yield
            finally:
                if accumulation is not None:
                    accumulation.position = position

    @contextlib.contextmanager
    def _eager_modules(self) -> Any:
        """The model modules as built (not compiled, not wrapped) while the body runs."""
        current = {name: getattr(self, name) for name in self._modules.eager}
        for name, module in self._modules.eager.items():
            setattr(self, name, module)
        try:
            yield
        finally:
            for name, module in current.items():
                setattr(self, name, module)

    def cpus_per_rank(self) -> int:
        """This process's share of the CPUs: the ranks on one machine split them (1 at least)."""
        ranks_here = self.rank_info.local_world_size if self.rank_info is not None else 1
        return max(1, available_cpus() // ranks_here)

    @property
    def world_size(self) -> int:
        """How many data-parallel ranks train together (1: no DDP)."""
        return self.rank_info.world_size if self.rank_info is not None else 1

    @property
    def data_seed(self) -> int:
        """The seed this process draws its batches from: each rank its own slice of the data."""
        return distributed.data_seed(self.seed, self.rank_info.rank) if self.rank_info is not None else self.seed

    @property
    def variant_info(self) -> VariantInfo:
        """The catalog's entry for the running variant (what the family's code asks)."""
        return self.info.variant(self.variant)

    @property
    def on_cuda(self) -> bool:
        return self.device.type == "cuda"
