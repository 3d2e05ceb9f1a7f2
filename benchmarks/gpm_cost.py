"""What reading GPM costs a training step: a ~5 ms CUDA step timed while gpudash's NVML sampler
ticks every 0.5 s (its default) with GPM on and with GPM off, in interleaved pairs.

    python benchmarks/gpm_cost.py                          # 12 pairs of 400 steps (needs CUDA)
    python benchmarks/gpm_cost.py --pairs 20 --steps 600
    python benchmarks/gpm_cost.py --tiny                   # a few CPU steps: the script's plumbing

The step: an MLP of ``--layers`` linear layers ``--width`` wide on a batch of ``--batch``, bf16
autocast, forward, backward and an SGD step (about 5 ms on an H100 with the defaults; the table
gives the measured time). The sampler runs as in gpudash, outside the training process: a
child process (this script with ``--sampler on|off``) samples the GPU the step runs on with
``NvmlSampler`` (GPM on or off), one tick every ``--interval`` s, from before each block of
``--steps`` steps (timed on the wall clock between two synchronizes) until after it. Each pair
runs both settings in a shuffled order.

Prints the step's ms with GPM off and on, the slowdown (on over off: the geometric mean of the
pairs' ratios with its 95% interval) and its verdict ("no change detected" when the interval holds
1); then what a tick costs the sampler: µs in GPM's calls (``nvmlGpmSampleGet`` and
``nvmlGpmMetricsGet`` per GPU) and the whole NVML tick, median and 95th percentile.
"""

from __future__ import annotations

import argparse
import datetime as dt
import platform
import random
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.step_timing_cost import paired_interval  # noqa: E402

SETTLE_S = 1.0  # after the sampler's first tick, before the timed block


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pairs", type=int, default=12, help="interleaved pairs, GPM on and off (default: 12)")
    p.add_argument("--steps", type=int, default=400, help="timed steps per block (default: 400)")
    p.add_argument("--width", type=int, default=8192, help="the MLP's width (default: 8192)")
    p.add_argument("--layers", type=int, default=3, help="its linear layers (default: 3)")
    p.add_argument("--batch", type=int, default=2048, help="its batch (default: 2048)")
    p.add_argument("--interval", type=float, default=0.5, help="the sampler's tick in s (default: 0.5, gpudash's)")
    p.add_argument("--tiny", action="store_true", help="a small MLP on the CPU, 2 pairs of 20 steps")
    p.add_argument("--sampler", choices=["on", "off"], help=argparse.SUPPRESS)  # the child: sample until stdin ends
    p.add_argument("--index", type=int, default=0, help=argparse.SUPPRESS)
    return p.parse_args()


# -- the sampler's process ------------------------------------------------------------------------
def sample_until_stdin_ends(gpm: bool, index: int, interval_s: float) -> int:
    """The child: gpudash's sampler of GPU ``index`` ticking every ``interval_s`` (as its thread
    does) until stdin closes; prints "ready" after the first tick, then each tick's µs."""
    from gpudash.host.nvml import NvmlSampler

    sampler = NvmlSampler(index, interval_s, gpus=(index,), gpm=gpm)
    info = sampler.open()
    done = threading.Event()

    def read_to_the_end() -> None:
        sys.stdin.read()
        done.set()

    threading.Thread(target=read_to_the_end, daemon=True).start()
    gpm_us: list[float] = []
    tick_us: list[float] = []
    reader, gpm_tick = sampler.gpm, sampler.gpm.tick

    def timed_gpm_tick() -> bool:  # GPM's part of each tick: its sample and metrics calls
        t = time.perf_counter()
        try:
            return gpm_tick()
        finally:
            gpm_us.append((time.perf_counter() - t) * 1e6)

    reader.tick = timed_gpm_tick  # type: ignore[method-assign]
    print(f"ready available={info.available} gpm_unavailable={info.gpm_unavailable}", flush=True)
    next_tick = time.monotonic()
    while not done.wait(max(0.0, next_tick - time.monotonic())):
        next_tick += interval_s
        t = time.perf_counter()
        sampler.sample()
        tick_us.append((time.perf_counter() - t) * 1e6)
    sampler.stop()
    print("gpm_us " + " ".join(f"{x:.1f}" for x in gpm_us[1:]))  # the first tick only primes
    print("tick_us " + " ".join(f"{x:.1f}" for x in tick_us[1:]))
    return 0


class SamplerProcess:
    """A child process sampling with GPM on or off, from ``__enter__`` to ``__exit__``."""

    def __init__(self, gpm: bool, index: int, interval_s: float) -> None:
        argv = [sys.executable, __file__, "--sampler", "on" if gpm else "off", "--index", str(index)]
        self.proc = subprocess.Popen(
            [*argv, "--interval", str(interval_s)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        self.ready = ""
        self.gpm_us: list[float] = []
        self.tick_us: list[float] = []

    def __enter__(self) -> SamplerProcess:
        assert self.proc.stdout is not None
        self.ready = self.proc.stdout.readline().strip()
        if not self.ready.startswith("ready"):
            raise SystemExit(f"the sampler did not start: {self.ready!r}")
        time.sleep(SETTLE_S)
        return self

    def __exit__(self, *_: object) -> None:
        out, _err = self.proc.communicate(timeout=60)
        for line in out.splitlines():
            name, *values = line.split()
            if name in ("gpm_us", "tick_us"):
                getattr(self, name).extend(float(v) for v in values)


# -- the step --------------------------------------------------------------------------------------
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


def measure(args: argparse.Namespace, torch: Any, cuda: bool, index: int) -> dict[str, Any]:
    """``--pairs`` pairs of blocks, GPM on and off in a shuffled order: each block's ms/step and
    each sampler's tick costs."""
    device = "cuda" if cuda else "cpu"
    step = mlp_step(torch, device, args.width, args.layers, args.batch)
    timed_block(torch, step, max(10, args.steps // 4), cuda)  # warm-up
    ms: dict[str, list[float]] = {"on": [], "off": []}
    costs: dict[str, list[float]] = {"gpm_us": [], "tick_us_on": [], "tick_us_off": []}
    said: dict[str, str] = {}
    order = random.Random(46)
    for _ in range(args.pairs):
        for setting in order.sample(["on", "off"], 2):
            with SamplerProcess(setting == "on", index, args.interval) as sampler:
                ms[setting].append(timed_block(torch, step, args.steps, cuda))
            said[setting] = sampler.ready
            if setting == "on":
                costs["gpm_us"] += sampler.gpm_us
            costs[f"tick_us_{setting}"] += sampler.tick_us
    return {"ms": ms, "costs": costs, "said": said}


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[int(q) - 1] if len(values) >= 2 else (values or [float("nan")])[0]


def print_tables(args: argparse.Namespace, device: str, r: dict[str, Any]) -> None:
    import torch

    now = dt.datetime.now().astimezone().isoformat(timespec="seconds")
    print(f"# GPM sampling cost on {device}; torch {torch.__version__}, python {platform.python_version()}, {now}")
    print(
        f"# MLP {args.layers}×{args.width}, batch {args.batch}, bf16 autocast; {args.pairs} pairs of "
        f"{args.steps} steps; NVML tick {args.interval} s"
    )
    print(f"# the sampler said, GPM on: {r['said'].get('on')}; off: {r['said'].get('off')}")
    on, off = r["ms"]["on"], r["ms"]["off"]
    mean, lo, hi = paired_interval(on, off)
    verdict = "slower" if lo > 1.0 else "faster" if hi < 1.0 else "no change detected"
    print("| pairs | ms/step, GPM off | ms/step, GPM on | slowdown, on over off (95% CI) | verdict |")
    print("|--:|--:|--:|---|---|")
    print(
        f"| {len(on)} | {statistics.mean(off):.3f} | {statistics.mean(on):.3f} | "
        f"{mean:.4f}× [{lo:.4f}–{hi:.4f}] | {verdict} |"
    )
    print()
    print("| a tick's cost in the sampler | ticks | median µs | p95 µs |")
    print("|---|--:|--:|--:|")
    for name, key in (
        ("GPM's calls (sample get + metrics get)", "gpm_us"),
        ("whole NVML tick, GPM on", "tick_us_on"),
        ("whole NVML tick, GPM off", "tick_us_off"),
    ):
        values = r["costs"][key]
        median = statistics.median(values) if values else float("nan")
        print(f"| {name} | {len(values)} | {median:.1f} | {pct(values, 95):.1f} |")


def main() -> int:
    args = parse_args()
    if args.sampler is not None:
        return sample_until_stdin_ends(args.sampler == "on", args.index, args.interval)
    import torch

    from gpudash.host.devices import cuda_index_hint

    if args.tiny:
        args.pairs, args.steps, args.width, args.layers, args.batch = 2, 20, 64, 2, 32
        print_tables(args, "cpu", measure(args, torch, False, 0))
        return 0
    if not torch.cuda.is_available():
        print("gpm_cost.py needs CUDA (--tiny runs on the CPU)", file=sys.stderr)
        return 2
    torch.cuda.set_device(0)
    print_tables(args, torch.cuda.get_device_name(), measure(args, torch, True, cuda_index_hint("cuda:0")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
