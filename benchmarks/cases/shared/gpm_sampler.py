"""gpudash's NVML sampler in a process of its own, as gpudash runs it beside a job (``gpm_cost``):
``python -m benchmarks.cases.shared.gpm_sampler on|off INDEX INTERVAL`` samples GPU ``INDEX`` every
``INTERVAL`` s, GPM on or off, until its stdin closes; it says ``ready`` after the first tick, and
at the end each tick's µs (in GPM's calls, and the whole tick)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

SETTLE_S = 1.0  # after the sampler's first tick, before the timed block (gpm_cost's default)


def sample_until_stdin_ends(gpm: bool, index: int, interval_s: float) -> int:
    """The child: the sampler ticking every ``interval_s`` (as its thread does) until stdin closes."""
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

    def __init__(self, gpm: bool, index: int, interval_s: float, settle_s: float = SETTLE_S) -> None:
        argv = [sys.executable, "-m", __name__, "on" if gpm else "off", str(index), str(interval_s)]
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.settle_s = settle_s
        self.ready = ""
        self.gpm_us: list[float] = []
        self.tick_us: list[float] = []

    def __enter__(self) -> SamplerProcess:
        assert self.proc.stdout is not None
        self.ready = self.proc.stdout.readline().strip()
        if not self.ready.startswith("ready"):
            raise RuntimeError(f"the sampler did not start: {self.ready!r}")
        time.sleep(self.settle_s)
        return self

    def __exit__(self, *_: object) -> None:
        out, _err = self.proc.communicate(timeout=60)
        for line in out.splitlines():
            name, *values = line.split()
            if name in ("gpm_us", "tick_us"):
                getattr(self, name).extend(float(v) for v in values)


if __name__ == "__main__":
    setting, index, interval = sys.argv[1:4]
    sys.exit(sample_until_stdin_ends(setting == "on", int(index), float(interval)))
