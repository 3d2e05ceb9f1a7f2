"""Two-stage pipelining over CUDA streams: the one place that knows the stream rules.

The rules (docs/workloads.md, "The stream rules"), each marked where it is applied:

1. Each side stream waits once on the stream that set up model, optimizer and data.
2. Host-to-device copies of a batch are issued on the producer stream (the producer
   function does its own copies, inside ``produce``).
3. The consumer waits for the producer's work on *that* item: an event recorded right
   after it, not ``wait_stream`` (which would also wait for the next item's work).
4. ``record_stream`` names the *consumer* stream, for every tensor handed across.
5. Before the host (or the current stream) reads what the side streams made, the
   reading stream waits on them.
6. Producer work must not sync the host: that is the producer function's duty; a sync
   there serialises the pipeline (the ``pipelined-loop`` variant shows it).

Beyond correctness: the consumer (the training step, the pipeline's critical path) is issued
first and runs on a higher-priority stream, so the producer fills the gaps instead of delaying it. Measured on an
H200 by stream_priority.py, a probe removed after commit e4133ae (docs/measurements.md): encdec
bs 8 289 → 296 steps/s, bs 16 207 → 224, augment bs 32 182 → 192.

On the CPU there are no streams. With ``emulate=True`` the same schedule (produce n+1,
consume n) runs in order, so its logic can be tested without a GPU; otherwise a CPU
device is refused with a clear message.
"""

from __future__ import annotations

import functools
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import torch

from workloads.catalog_types import NEEDS_STREAMS, WorkloadError

T = TypeVar("T")
CONSUMER_PRIORITY = -1  # lower is higher in CUDA; the producer keeps the default 0
# Items produced ahead of the consumer: 1 makes item n+1 while item n is consumed. 2 (item n+2)
# was tried against the consumer stream's idle time on an H100 and left it in place (single runs,
# no gain detected: pipeline_profile.py --depth, a probe removed after commit e4133ae;
# docs/measurements.md). Kept as a parameter (``TwoStagePipeline(depth=...)``) to try it again.
PREFETCH_DEPTH = 1


@dataclass
class Handoff:
    """Tensors made by the producer for one item, and the event that marks them ready."""

    tensors: tuple[torch.Tensor, ...]
    ready: torch.cuda.Event | None


@functools.cache
def stage_streams(device: torch.device) -> tuple[torch.cuda.Stream, torch.cuda.Stream]:
    """The producer and (higher-priority) consumer streams of ``device``, made once per process.

    Every pipelined configuration runs on these two. ``torch.cuda.Stream()`` hands out the next
    of torch's pooled streams (32 per priority), and cuBLAS keeps a workspace (32 MiB on Hopper)
    for each stream it has run a matmul on, for the life of the process: with two new streams per
    configuration, each visit to a pipelined variant with a matmul (augment's classifier) could
    leave another workspace behind until the pool wrapped (docs/soak-gpu.md)."""
    return torch.cuda.Stream(device), torch.cuda.Stream(device, priority=CONSUMER_PRIORITY)


class TwoStagePipeline:
    """Producer stage on stream P makes item n+depth while the consumer stage on stream C uses item n."""

    def __init__(self, device: torch.device, *, emulate: bool = False, depth: int | None = None) -> None:
        self.device = device
        self.uses_streams = device.type == "cuda"
        if not self.uses_streams and not emulate:
            raise WorkloadError(f"pipelining {NEEDS_STREAMS}")
        self.depth = PREFETCH_DEPTH if depth is None else depth
        self._pending: deque[Handoff] = deque()  # produced, not yet consumed, oldest first
        if self.uses_streams:
            origin = torch.cuda.current_stream(device)
            self.producer, self.consumer = stage_streams(device)
            self.producer.wait_stream(origin)  # rule 1
            self.consumer.wait_stream(origin)  # rule 1

    def produce(self, fn: Callable[..., Sequence[torch.Tensor]], *args: object) -> Handoff:
        """Run ``fn(*args)`` on the producer stream; ``fn`` does its own H2D copies (rule 2)."""
        if not self.uses_streams:
            return Handoff(tuple(fn(*args)), None)
        with torch.cuda.stream(self.producer):
            out = tuple(fn(*args))
        ready = torch.cuda.Event()
        ready.record(self.producer)  # rule 3: marks exactly this item's work
        return Handoff(out, ready)

    def consume(self, item: Handoff, fn: Callable[..., T]) -> T:
        """Run ``fn(*item.tensors)`` on the consumer stream once the item is ready."""
        if not self.uses_streams:
            return fn(*item.tensors)
        with torch.cuda.stream(self.consumer):
            assert item.ready is not None  # produce() records one whenever streams are used
            self.consumer.wait_event(item.ready)  # rule 3
            for t in item.tensors:
                t.record_stream(self.consumer)  # rule 4: the consumer, not the producer
            return fn(*item.tensors)

    def step(
        self,
        next_input: Callable[[], Sequence[object]],
        produce_fn: Callable[..., Sequence[torch.Tensor]],
        consume_fn: Callable[..., T],
    ) -> T:
        """One pipelined step: consume item n, produce item n+depth (the first call primes items
        0..depth-1). Items are consumed in the order they were drawn: the same training as serial."""
        while len(self._pending) < self.depth:
            self._pending.append(self.produce(produce_fn, *next_input()))
        # The critical path (the consumer) is issued first; the producer's next item overlaps it.
        result = self.consume(self._pending.popleft(), consume_fn)
        self._pending.append(self.produce(produce_fn, *next_input()))
        return result

    def hand_to_current(self, *tensors: torch.Tensor | None) -> None:
        """Rule 5: order the current stream after both stages, and hand it ``tensors``."""
        if not self.uses_streams:
            return
        current = torch.cuda.current_stream(self.device)
        current.wait_stream(self.producer)
        current.wait_stream(self.consumer)
        for t in tensors:
            if t is not None:
                t.record_stream(current)

    def close(self) -> None:
        """Drop the items in flight and join both stages into the current stream."""
        self._pending.clear()
        self.hand_to_current()
