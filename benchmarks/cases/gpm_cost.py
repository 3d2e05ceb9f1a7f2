"""What reading GPM costs a training step: a ~5 ms CUDA step timed while gpudash's NVML sampler
ticks every 0.5 s (its default) with GPM on and with GPM off, in pairs.

The step: an MLP of ``layers`` linear layers ``width`` wide on a batch of ``batch``, bf16 autocast,
forward, backward and an SGD step (about 5 ms on an H100 with the defaults). The sampler runs as in
gpudash, outside the training process (``shared.gpm_sampler``): it samples the GPU the step runs on
with ``NvmlSampler`` (GPM on or off), a tick every ``interval`` s, from before each block of
``steps`` steps (timed on the wall clock between two synchronizes) until after it. Each pair runs
both settings in a shuffled order. Also what a tick costs the sampler: µs in GPM's calls
(``nvmlGpmSampleGet`` and ``nvmlGpmMetricsGet`` per GPU) and the whole NVML tick."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from benchmarks.cases.shared.gpm_sampler import SETTLE_S, SamplerProcess
from benchmarks.harness.case import Unavailable
from benchmarks.harness.context import Run
from benchmarks.harness.params import param
from benchmarks.harness.schedule import Schedule, rounds
from benchmarks.harness.stats import ratio, ratio_text


@dataclass(frozen=True)
class Params:
    pairs: int = param(12, "pairs of blocks, GPM on and off")
    steps: int = param(400, "timed steps a block")
    width: int = param(8192, "the MLP's width")
    layers: int = param(3, "its linear layers")
    batch: int = param(2048, "its batch")
    interval: float = param(0.5, "the sampler's tick, seconds (gpudash's)")
    settle: float = param(SETTLE_S, "seconds the sampler ticks after its first tick, before each timed block")
    device: str = param("cuda", "cuda, or cpu (the plumbing: the sampler still runs)")


def mlp_step(torch: Any, device: str, width: int, layers: int, batch: int) -> Callable[[], None]:
    """One training step of an MLP: forward under bf16 autocast, backward, SGD."""
    nn = torch.nn
    model = nn.Sequential(*(m for _ in range(layers) for m in (nn.Linear(width, width), nn.ReLU()))).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-4)
    x = torch.randn(batch, width, device=device)

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type=device, dtype=torch.bfloat16):
            loss = model(x).float().pow(2).mean()
        loss.backward()
        optimizer.step()

    return step


def timed_block(torch: Any, step: Callable[[], None], steps: int, cuda: bool) -> float:
    """ms per step over ``steps`` steps, wall clock between two synchronizes."""
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    sync()
    t = time.perf_counter()
    for _ in range(steps):
        step()
    sync()
    return (time.perf_counter() - t) / steps * 1e3


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[int(q) - 1] if len(values) >= 2 else (values or [float("nan")])[0]


def measure(run: Run, p: Params) -> None:
    import torch

    from gpudash.host.devices import cuda_index_hint

    cuda = p.device == "cuda"
    if cuda and not torch.cuda.is_available():
        raise Unavailable("needs CUDA (-p device=cpu runs the plumbing on the CPU)")
    if cuda:
        torch.cuda.set_device(0)
    index = cuda_index_hint("cuda:0") if cuda else 0
    step = mlp_step(torch, p.device, p.width, p.layers, p.batch)
    timed_block(torch, step, max(10, p.steps // 4), cuda)  # warm-up
    costs: dict[str, list[float]] = {"gpm_us": [], "tick_us_on": [], "tick_us_off": []}
    said: dict[str, str] = {}

    def block(setting: str) -> float:
        with SamplerProcess(setting == "on", index, p.interval, p.settle) as sampler:
            ms = timed_block(torch, step, p.steps, cuda)
        said[setting] = sampler.ready
        costs["gpm_us"] += sampler.gpm_us if setting == "on" else []
        costs[f"tick_us_{setting}"] += sampler.tick_us
        return ms

    ms = rounds({"off": lambda: block("off"), "on": lambda: block("on")}, p.pairs, Schedule.PAIRS, seed=46)
    run.comment(f"GPM sampling cost on {p.device}")
    shape = f"MLP {p.layers}×{p.width}, batch {p.batch}, bf16 autocast"
    run.comment(f"{shape}; {p.pairs} pairs of {p.steps} steps; NVML tick {p.interval} s")
    run.comment(f"the sampler said, GPM on: {said.get('on')}; off: {said.get('off')}")
    tables(run, ms, costs)


def tables(run: Run, ms: dict[str, list[float]], costs: dict[str, list[float]]) -> None:
    """The slowdown, on over off by pairs; then a tick's cost in the sampler."""
    on, off = ms["on"], ms["off"]
    run.values("GPM off", off, "ms a step", higher_is_better=False)
    run.values("GPM on", on, "ms a step", higher_is_better=False)
    f = run.keep("on/off", ratio("on/off", off, on, higher_is_better=False))
    table = run.table(
        ["pairs", "ms/step, GPM off", "ms/step, GPM on", "slowdown, on over off (95% CI)", "verdict"],
        ["--:", "--:", "--:", "---", "---"],
    )
    run.row(table, len(on), f"{statistics.mean(off):.3f}", f"{statistics.mean(on):.3f}", ratio_text(f, 4), f.verdict)
    run.line()
    ticks = run.table(["a tick's cost in the sampler", "ticks", "median µs", "p95 µs"], ["---", "--:", "--:", "--:"])
    for name, key in (
        ("GPM's calls (sample get + metrics get)", "gpm_us"),
        ("whole NVML tick, GPM on", "tick_us_on"),
        ("whole NVML tick, GPM off", "tick_us_off"),
    ):
        values = costs[key]
        median = statistics.median(values) if values else float("nan")
        run.row(ticks, name, len(values), f"{median:.1f}", f"{pct(values, 95):.1f}")
