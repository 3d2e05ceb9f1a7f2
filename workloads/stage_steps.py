"""A workload's step: its stages run in order, or overlapped on two streams for a pipelined
variant (``TwoStagePipeline``), each inside a profiler label while a window asks for one; the
next input, with a batch peeked at and pushed back; and the warm-up, the stages run once on that
batch with the training state put back. ``Workload`` (``workloads.base``) takes them from here."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Sequence
    from contextlib import AbstractContextManager

    from workloads.knobs import Knobs
    from workloads.streams import TwoStagePipeline


class StageSteps:
    """``step``, the input it takes and ``warm_up``. The rest of the workload
    (``workloads.base.Workload``) builds the running configuration's stages and draws its host
    batches."""

    if TYPE_CHECKING:  # pragma: no cover - what this part reads of the workload
        pipeline: TwoStagePipeline | None
        annotate_stages: str | None
        last_loss: torch.Tensor | None
        _produce: Callable[..., Any] | None
        _consume: Callable[..., Any] | None
        _pushback: tuple[torch.Tensor, ...] | None
        _stage_names: tuple[str | None, str]
        knobs: Knobs

        def _draw_input(self) -> tuple[torch.Tensor, ...]: ...
        def drain(self) -> None: ...
        def generators(self) -> Sequence[torch.Generator]: ...
        def _restore_point(self, generators: Sequence[torch.Generator]) -> AbstractContextManager[None]: ...

    def step(self) -> None:
        """Enqueue one training step: producer then consumer, or overlapped when pipelined."""
        produce, consume = self._produce, self._consume
        assert consume is not None
        if produce is None and self.annotate_stages is None:  # serial: the common path first
            self.last_loss = consume(*self._next_input())  # (_next_input: a diagnosis times it)
            return
        if self.annotate_stages is not None:
            produce, consume = (
                self._annotated(produce, self._stage_names[0]),
                self._annotated(consume, self._stage_names[1]),
            )
        if self.pipeline is not None:
            assert produce is not None
            self.last_loss = self.pipeline.step(self._next_input, produce, consume)
            self.pipeline.hand_to_current(self.last_loss)
        elif produce is None:
            self.last_loss = consume(*self._next_input())
        else:
            self.last_loss = consume(*produce(*self._next_input()))

    def _annotated(self, fn: Callable[..., Any] | None, name: str | None) -> Any:
        """``fn`` inside ``record_function(annotate_stages + name)``."""
        if fn is None or name is None:
            return fn
        label = f"{self.annotate_stages}{name}"

        def run(*args: Any) -> Any:
            with torch.profiler.record_function(label):
                return fn(*args)

        return run

    def _next_input(self) -> tuple[torch.Tensor, ...]:
        batch, self._pushback = self._pushback, None
        return batch if batch is not None else self._draw_input()

    def _peek_input(self) -> tuple[torch.Tensor, ...]:
        """The batch the next step will get, without taking it from the sequence."""
        if self._pushback is None:
            self._pushback = self._draw_input()
        return self._pushback

    def warm_up(self) -> None:
        """Compile, capture and autotune now, on the next batch, then put the training state
        back: the first counted step runs as every later one (and trains the same)."""
        if not self.knobs.warmups:
            return
        batch = self._peek_input()
        with self._restore_point(self.generators()):
            out = self._produce(*batch) if self._produce is not None else batch
            assert self._consume is not None  # set by _setup, before it warms up
            self._consume(*out)
            self.drain()
        self.drain()
