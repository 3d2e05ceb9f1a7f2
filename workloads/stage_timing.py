"""Timing a workload apart from its training: each stage of a two-stage family alone (the overlap
bound a pipeline can reach) and, in a data-parallel run, rank 0 training alone (the scaling
efficiency's reference). Measurements, not training steps: each synchronizes once, never per step,
and trains nothing it does not put back. ``Workload`` (``workloads.base``) takes them from here."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

import torch

from workloads.catalog_types import WorkloadError

if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Sequence
    from contextlib import AbstractContextManager

    from workloads.catalog_types import FamilyInfo
    from workloads.distributed import RankInfo


def ms_per_call(fn: Callable[[], object], calls: int, cuda: bool) -> float:
    """Mean ms per call of ``fn`` over ``calls`` calls in a row: CUDA events on the current stream
    with ``cuda``, else the wall clock."""
    if cuda:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / calls
    t = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t) * 1000.0 / calls


class StageTiming:
    """``time_stages`` and ``time_single_rank``. The rest of the workload (``workloads.base.Workload``)
    provides its stages, its next input, its step and the restore point."""

    if TYPE_CHECKING:  # pragma: no cover - what this part reads of the workload
        info: ClassVar[FamilyInfo]
        variant: str
        rank_info: RankInfo | None
        trained_module: ClassVar[str]
        _produce: Callable[..., Any] | None
        _consume: Callable[..., Any] | None

        @property
        def on_cuda(self) -> bool: ...

        def _stages(self) -> Any: ...
        def _peek_input(self) -> tuple[torch.Tensor, ...]: ...
        def step(self) -> None: ...
        def drain(self) -> None: ...
        def generators(self) -> Sequence[torch.Generator]: ...
        def _restore_point(self, generators: Sequence[torch.Generator]) -> AbstractContextManager[None]: ...

    def stage_pair(self) -> tuple[tuple[str, Callable[[], Any]], tuple[str, Callable[[Any], Any]]] | None:
        """The two stages of a two-stage family, each runnable alone on a fixed batch:
        ((name, produce()), (name, consume(produced))). None: the variant has no such split."""
        produce, consume = self._stages()
        if produce is None or self._produce is None or self._consume is None:
            return None
        batch, run_produce, run_consume = self._peek_input(), self._produce, self._consume
        return (produce[0], lambda: run_produce(*batch)), (consume[0], lambda out: run_consume(*out))

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
        return {
            name1: ms_per_call(produce, steps, self.on_cuda),
            name2: ms_per_call(lambda: consume(produced), steps, self.on_cuda),
        }

    def time_single_rank(self, steps: int = 50) -> float | None:
        """In a data-parallel run, rank 0's step time (ms) training alone: the plain module, no
        all-reduce, while the other ranks wait at a barrier; the training state is put back after.
        The reference of the scaling efficiency (N-rank rate ÷ N × one rank's). None on other ranks."""
        import torch.distributed as dist

        if self.rank_info is None:
            raise WorkloadError("scaling efficiency needs a data-parallel run (--nproc 2 or more)")
        ms = None
        try:
            if self.rank_info.is_leader:
                ddp = getattr(self, self.trained_module)
                setattr(self, self.trained_module, ddp.module)
                try:
                    with self._restore_point(self.generators()):
                        self.step()  # the plain module's first call outside the timing
                        self.drain()
                        ms = ms_per_call(self.step, steps, self.on_cuda)
                        self.drain()
                finally:
                    setattr(self, self.trained_module, ddp)
        finally:
            dist.barrier()  # every rank leaves together, also when rank 0's measurement failed
        return ms
