"""The stream rules on a real GPU: a tensor handed from the producer stream to the consumer stream
is not given back to the allocator while the consumer still reads it (``record_stream`` on the
consumer, rule 4 in ``workloads/streams.py``).

The caching allocator keeps a freed block for the stream that allocated it. Without rule 4, the
producer's next item takes the block of the item the consumer has been handed but not yet read
(its host reference is gone once the step is issued), and overwrites it: the consumer then trains
on the next batch, not this one. The test makes that window wide — the consumer is kept busy
before it reads, the producer allocates the same size at once — and checks that every item was
read as it was made, which is what the serial schedule computes."""

from __future__ import annotations

import pytest
import torch

from workloads.streams import TwoStagePipeline

pytestmark = pytest.mark.gpu

ITEMS = 40
SIZE = 1 << 20  # floats per item: 4 MiB, the same block size every time


def _seen(depth: int) -> list[tuple[float, float]]:
    """What the consumer read of each item (its min and max), through ``TwoStagePipeline.step``."""
    device = torch.device("cuda")
    busy = torch.randn(2048, 2048, device=device)
    pipe = TwoStagePipeline(device, depth=depth)
    numbers = iter(range(ITEMS + depth))

    def produce(i: int) -> tuple[torch.Tensor]:
        return (torch.full((SIZE,), float(i), device=device),)  # allocated on the producer stream

    def consume(x: torch.Tensor) -> torch.Tensor:
        for _ in range(6):  # about a millisecond of other work on the consumer stream first
            torch.mm(busy, busy)
        return torch.stack([x.min(), x.max()])

    read = [pipe.step(lambda: (next(numbers),), produce, consume) for _ in range(ITEMS)]
    pipe.close()
    torch.cuda.synchronize()
    return [(float(r[0]), float(r[1])) for r in read]


@pytest.mark.parametrize("depth", [1, 2])
def test_the_consumer_reads_each_item_as_the_producer_made_it(depth: int) -> None:
    assert _seen(depth) == [(float(i), float(i)) for i in range(ITEMS)]  # the serial schedule's items
