"""A/B of the pipeline's stream priorities and issue order, against serial, in one run.

    python benchmarks/stream_priority.py

Why the consumer stream gets the higher priority (workloads/streams.py): this prints
steps/s of the pipelined variants for producer/consumer priorities (0, 0), (0, -1), (-1, 0)
and both issue orders, beside the serial variant on the same GPU.
"""

from __future__ import annotations

import datetime
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from benchmarks.encdec_breakdown import timed  # noqa: E402
from workloads import streams  # noqa: E402
from workloads.base import WorkloadOptions  # noqa: E402
from workloads.factory import build  # noqa: E402

ORIGINAL_STEP = streams.TwoStagePipeline.step


def with_priorities(producer: int, consumer: int):
    def init(self, device, *, emulate=False):  # same as TwoStagePipeline.__init__, priorities varied
        self.device, self.uses_streams, self._pending = device, True, None
        origin = torch.cuda.current_stream(device)
        self.producer = torch.cuda.Stream(device, priority=producer)
        self.consumer = torch.cuda.Stream(device, priority=consumer)
        self.producer.wait_stream(origin)
        self.consumer.wait_stream(origin)

    return init


def consumer_first(self, next_input, produce_fn, consume_fn):
    if self._pending is None:
        self._pending = self.produce(produce_fn, *next_input())
    result = self.consume(self._pending, consume_fn)
    self._pending = self.produce(produce_fn, *next_input())
    return result


def main() -> None:
    print(f"# stream priority A/B — {torch.cuda.get_device_name()}, torch {torch.__version__}, {datetime.date.today()}\n")
    print("| workload | batch | serial | issue order | priority P/C | pipelined steps/s |")
    print("|---|---:|---:|---|---|---:|")
    original_init = streams.TwoStagePipeline.__init__
    for name, serial, batches in (("encdec", "serial", (8, 16)), ("augment", "gpu-vectorized", (32,))):
        for bs in batches:
            w = build(name, "cuda", WorkloadOptions(variant=serial, batch_size=bs))
            base = 1000 / timed(w.step)
            for order, step in (("producer first", ORIGINAL_STEP), ("consumer first", consumer_first)):
                streams.TwoStagePipeline.step = step
                for prio in ((0, 0), (0, -1), (-1, 0)):
                    streams.TwoStagePipeline.__init__ = with_priorities(*prio)
                    w.set_variant("pipelined")
                    rate = 1000 / timed(w.step)
                    w.set_variant(serial)
                    print(f"| {name} | {bs} | {base:.1f} | {order} | {prio[0]}/{prio[1]} | {rate:.1f} |", flush=True)
            w.close()
    streams.TwoStagePipeline.__init__, streams.TwoStagePipeline.step = original_init, ORIGINAL_STEP


if __name__ == "__main__":
    main()
