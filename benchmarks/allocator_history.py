"""How the CUDA caching allocator's figures of one configuration depend on what ran before it:
the engine's step loop, in-process, over the soak's changes (batch ×2, knobs, the pipelined
variant, each other family, every second change back to ``encdec serial``), a line of torch's
allocator statistics at the end of each configuration (the diagnosis behind docs/soak-gpu.md).

    python -m benchmarks.allocator_history [--steps 40] [--cycles 3] [--empty-after-warmup]

Columns: allocated (live tensors), reserved (segments held from the driver; its large and small
pools), inactive_split (free space inside segments that hold live blocks: what ``empty_cache``
cannot give back), segments, the configuration's peak allocated, the device's used memory
(``mem_get_info``, device-wide, like NVML's), what lies outside the allocator (used − reserved:
the context, loaded kernels, library handles) and the reserved memory per stream.
``--empty-after-warmup`` also empties the cache 8 steps into each configuration, to see how much
of the variation is the first steps'.
Run under ``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`` to compare that allocator mode.
"""

from __future__ import annotations

import argparse
import sys
from collections import deque
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpudash.engine.builders import workload_builder  # noqa: E402
from gpudash.engine.loop import StepLoop  # noqa: E402
from benchmarks.soak import CUDA_KNOBS  # noqa: E402
from gpudash.core.protocol import RunConfig, SetBatchSize, SetKnobs, SetVariant, Stop, SwitchWorkload  # noqa: E402
from workloads.registry import FAMILIES  # noqa: E402

MiB = 2**20


def plan(base_variant: str, base_batch: int, cycles: int) -> list[tuple[str, Any]]:
    """The soak's opening tour (each change once, each other family once), then ``cycles`` cycles."""
    others = [f for f in FAMILIES if f != "encdec"]
    back = ("back", SwitchWorkload("encdec", base_variant, base_batch))
    within = [("batch x2", SetBatchSize(base_batch * 2)), ("back", SetBatchSize(base_batch)),
              ("knobs on", SetKnobs(CUDA_KNOBS)), ("back", SetKnobs("none")),
              ("pipelined", SetVariant("pipelined")), ("back", SetVariant(base_variant))]
    steps = list(within)
    for family in others:
        steps += [(family, SwitchWorkload(family)), back]
    for i in range(cycles):
        family = others[i % len(others)]
        steps += [*within, (family, SwitchWorkload(family)), back]
    return steps


def line(loop: StepLoop, device: torch.device, change: str) -> str:
    s = torch.cuda.memory_stats(device)
    free, total = torch.cuda.mem_get_info(device)
    used = total - free
    c = loop.config()
    return (f"{change:>14s} → {c['workload']:>14s} {c['variant']:>10s} b{c['batch_size']:>4s} "
            f"alloc {s['allocated_bytes.all.current'] / MiB:7.1f} "
            f"reserved {s['reserved_bytes.all.current'] / MiB:7.1f} "
            f"(large {s['reserved_bytes.large_pool.current'] / MiB:6.1f} "
            f"small {s['reserved_bytes.small_pool.current'] / MiB:5.1f}) "
            f"inactive_split {s['inactive_split_bytes.all.current'] / MiB:6.1f} "
            f"segments {s['segment.all.current']:3d} peak_alloc {s['allocated_bytes.all.peak'] / MiB:7.1f} "
            f"used {used / MiB:7.1f} outside {(used - s['reserved_bytes.all.current']) / MiB:7.1f}"
            f" | by stream {reserved_by_stream(device)}")


def reserved_by_stream(device: torch.device) -> str:
    """Reserved MiB per stream the segments were allocated for (``s0``: the default stream;
    others by the last three digits of their handle). A free block is reused only by its own
    stream, so what sits on a stream the running configuration does not use is dead weight."""
    by: dict[int, int] = {}
    for segment in torch.cuda.memory_snapshot():
        if segment.get("device", device.index) == device.index:
            by[segment["stream"]] = by.get(segment["stream"], 0) + segment["total_size"]
    return " ".join(f"s{stream % 1000}:{size / MiB:.0f}" for stream, size in sorted(by.items()))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=40, help="steps per configuration (40)")
    p.add_argument("--cycles", type=int, default=3, help="cycles after the opening tour (3)")
    p.add_argument("--empty-after-warmup", action="store_true", help="also empty the cache 8 steps in")
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        p.error("needs a CUDA GPU: it reads the CUDA caching allocator's statistics")
    device = torch.device("cuda", torch.cuda.current_device())
    builder = workload_builder(RunConfig(workload="encdec", device=str(device)), device)
    loop = StepLoop(builder("encdec", None, None, None), emit=lambda m: None, builder=builder)
    pending = deque(plan(loop.workload.variant, loop.workload.batch_size, args.cycles))
    state: dict[str, Any] = {"since": 0, "change": "start", "emptied": False}

    def controls(timeout: float) -> Any:
        steps = loop.steps_issued - state["since"]
        if args.empty_after_warmup and steps >= 8 and not state["emptied"]:
            loop.workload.drain()
            torch.cuda.empty_cache()
            state["emptied"] = True
        if steps < args.steps:
            return None
        loop.workload.drain()
        print(line(loop, device, state["change"]), flush=True)
        torch.cuda.reset_peak_memory_stats(device)
        state.update(since=loop.steps_issued, emptied=False)
        if not pending:
            return Stop()
        state["change"], control = pending.popleft()
        return control

    loop.controls = controls
    loop.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
