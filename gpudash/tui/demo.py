"""A synthetic ``EngineSource`` (no torch, no GPU): for developing the dashboard and benchmarks.

``python -m gpudash.tui.demo [--gpu] [--gpm]`` opens the dashboard on made-up but plausible
numbers that react to the controls (pipelining is faster, a bigger batch trades steps/s for
samples/s, batch 512 and up "runs out of memory"); ``--gpm``: a Hopper's GPM figures (SM, tensor
and DRAM activity) and model FLOPs with MFU too. Not used by ``gpudash`` itself.
"""

from __future__ import annotations

import math
import random
import sys
import time
from collections import deque
from collections.abc import Callable
from dataclasses import replace

from gpudash.core import protocol  # the controls, as protocol.SetVariant etc.
from gpudash.core.flops_note import FlopsNote
from gpudash.core.protocol import (
    FLOPS,
    Control,
    Event,
    EventKind,
    GpuInfo,
    GpuSample,
    Message,
    RunConfig,
    Sample,
    SourceInfo,
)
from gpudash.core.running import Running
from workloads.registry import FAMILIES


class SyntheticSource:
    """Messages generated from the clock: a sample every ``interval_s``, a GPU tick every 2."""

    def __init__(
        self,
        config: RunConfig | None = None,
        *,
        gpu: bool = True,
        clock: Callable[[], float] = time.monotonic,
        startup_s: float = 1.0,
        interval_s: float = 0.25,
        seed: int = 0,
        gpm: bool = False,
    ) -> None:
        self.config = config or RunConfig()
        self.gpu = gpu
        self.gpm = gpm and gpu  # GPM's figures on the GPU samples, model FLOPs and MFU on the samples
        self._counted: tuple[str, str, int] | None = None  # the configuration whose FLOPs were told
        self.clock = clock
        self.startup_s = startup_s
        self.interval_s = interval_s
        self.rng = random.Random(seed)
        self.gpu_info = (
            GpuInfo(available=True, driver="550.54.15", names=("NVIDIA H100 80GB HBM3 (synthetic)",), index=0)
            if gpu
            else GpuInfo(available=False, unavailable="synthetic source without a GPU")
        )
        fam = FAMILIES[self.config.workload]
        dev = "cuda" if gpu else "cpu"
        self.device = "cuda:0" if gpu else "cpu"
        self.workload = fam.name
        self.variant = self.config.variant or fam.default_variant
        self.batch = self.config.batch_size or fam.defaults(dev).batch_size
        self._t0: float | None = None
        self._next_t = 0.0
        self._started = False
        self._alive = False
        self._paused = False
        self._steps = 0
        self._samples = 0
        self._energy = 0.0
        self._out: list[Message] = []
        self._controls: list[Control] = []
        self.sent: deque[Control] = deque(maxlen=64)  # the latest controls (one a change: bounded)

    # -- EngineSource -------------------------------------------------------------------------
    @property
    def info(self) -> SourceInfo:
        return SourceInfo()

    def start(self) -> None:
        self._t0 = self.clock()
        self._alive = True
        self._started = False
        self._next_t = self.startup_s
        self._out.append(Event(0.0, EventKind.STARTING, message="starting workload (importing torch)…"))

    def send(self, control: Control) -> None:
        if not self._alive:
            raise RuntimeError("not running")
        self.sent.append(control)
        self._controls.append(control)

    @property
    def alive(self) -> bool:
        return self._alive

    def restart(self) -> None:
        self.start()

    def stop(self) -> None:
        self._alive = False

    def poll(self) -> list[Message]:
        if self._t0 is None or not self._alive:
            out, self._out = self._out, []
            return out
        now = self.clock() - self._t0
        while self._next_t <= now:
            t = self._next_t
            if not self._started:
                self._started = True
                self._out.append(
                    Event(
                        t, EventKind.STARTED, message=f"started {self.workload}/{self.variant}", running=self._running()
                    )
                )
            self._apply_controls(t)
            self._emit(t)
            self._next_t += self.interval_s
        out, self._out = self._out, []
        return out

    # -- simulation ---------------------------------------------------------------------------
    def _running(self) -> Running:
        return Running(self.workload, self.variant, self.batch, device=self.device)

    def _apply_controls(self, t: float) -> None:
        for c in self._controls:
            before = {"variant": self.variant, "workload": self.workload}
            if isinstance(c, protocol.SetBatchSize):
                self._out.append(self._set_batch(t, c.batch_size))
            elif isinstance(c, protocol.SetVariant):
                fam = FAMILIES[self.workload]
                if why := fam.refusal(c.variant, self.device):
                    self._out.append(Event(t, EventKind.ERROR, "variant", self.variant, c.variant, why))
                else:
                    self.variant = c.variant
                    self._out.append(
                        Event(t, EventKind.CHANGED, "variant", before["variant"], self.variant, running=self._running())
                    )
            elif isinstance(c, protocol.SwitchWorkload):
                fam = FAMILIES[c.workload]
                self.workload = fam.name
                self.variant = c.variant or fam.default_variant
                self.batch = c.batch_size or fam.defaults("cuda" if self.gpu else "cpu").batch_size
                self._out.append(
                    Event(t, EventKind.CHANGED, "workload", before["workload"], self.workload, running=self._running())
                )
            elif isinstance(c, protocol.Pause):
                self._paused = True
                self._out.append(Event(t, EventKind.PAUSED))
            elif isinstance(c, protocol.Resume):
                self._paused = False
                self._out.append(Event(t, EventKind.RESUMED))
            elif isinstance(c, protocol.Stop):
                self._alive = False
                self._out.append(Event(t, EventKind.STOPPED, message="stopped"))
        self._controls.clear()

    def _set_batch(self, t: float, n: int) -> Event:
        """Batch size ``n`` asked for: refused under 1 (and, on a GPU, from 512 on: out of memory),
        else taken; the event that says which."""
        before = str(self.batch)
        if n < 1:
            why = f"batch size must be at least 1, got {n}"
        elif n >= 512 and self.gpu:
            why = f"CUDA out of memory at batch {n}; back to batch {self.batch}"
        else:
            self.batch = n
            return Event(t, EventKind.CHANGED, "batch_size", before, str(n), running=self._running())
        return Event(t, EventKind.ERROR, "batch_size", before, str(n), why)

    def _rate(self) -> float:
        """Made up from what the catalog says of the variant: each later one a little faster,
        pipelining +9%, host syncs −30%."""
        fam = FAMILIES[self.workload]
        info = fam.variant(self.variant)
        base = 0.7 + 0.3 * fam.variant_names.index(self.variant) / max(1, len(fam.variants) - 1)
        base *= (1.09 if info.pipelined else 1.0) * (1.0 if info.sync_free else 0.7)
        return base * 280.0 * (8 / self.batch) ** 0.6 * (1.0 if self.gpu else 0.1)

    def _emit(self, t: float) -> None:
        if self._paused:
            return
        r = self._rate() * (1 + 0.03 * self.rng.uniform(-1, 1))
        steps = int(r * self.interval_s)
        self._steps += steps
        self._samples += steps * self.batch
        ms = 1000.0 / r
        sync_free = FAMILIES[self.workload].variant(self.variant).sync_free
        syncs = (0.0 if sync_free else 6.0) if self.gpu else None
        flops, tflops, mfu = self._model_flops(t, r)
        self._out.append(
            Sample(
                t,
                self.workload,
                self.variant,
                self.batch,
                self._steps,
                self._samples,
                self.interval_s,
                r,
                r * self.batch,
                ms,
                ms * 1.3,
                syncs,
                flops_per_step=flops,
                tflops=tflops,
                mfu_pct=mfu,
            )
        )
        if self.gpu and round(t / self.interval_s) % 2 == 0:
            util = min(99.0, 70 + 20 * (self._rate() / 300))
            power = 250 + 200 * util / 100 + 10 * math.sin(t)
            self._energy += power * self.interval_s * 2
            tick = GpuSample(
                t,
                util,
                util * 0.45,
                2000 + 90 * self.batch,
                81559,
                power,
                1980 - 0.5 * util,
                55 + util / 5,
                self._energy,
                "",
            )
            self._out.append(self._with_gpm(tick))

    def _model_flops(self, t: float, rate: float) -> tuple[float | None, float | None, float | None]:
        """(FLOPs a step, TFLOP/s, MFU %) at ``rate`` steps/s, made up in proportion to the batch; a
        "flops" event the first sample of each configuration, as the engine sends."""
        if not self.gpm:
            return None, None, None
        flops = 2.4e11 * self.batch
        if self._counted != (self.workload, self.variant, self.batch):
            self._counted = (self.workload, self.variant, self.batch)
            line = f"model FLOPs: {flops / 1e12:.3g} TFLOP a step (bf16 100%); MFU over {PEAK_TFLOPS:g} TFLOP/s"
            note = FlopsNote(int(flops), "bf16", PEAK_TFLOPS, "H100 SXM bf16 dense (synthetic)")
            self._out.append(Event(t, EventKind.MEASURED, FLOPS, message=f"{line} ({note.peak_source})", data=note))
        tflops = flops * rate / 1e12
        return flops, tflops, 100.0 * tflops / PEAK_TFLOPS

    def _with_gpm(self, tick: GpuSample) -> GpuSample:
        """``tick`` with a Hopper's GPM figures: the SMs busier at a bigger batch, the tensor cores a
        little under them (``tick`` as it is without GPM)."""
        if not self.gpm or tick.gpu_util_pct is None:
            return tick
        sm = tick.gpu_util_pct * min(1.0, 0.35 + self.batch / 64) * (1 + 0.02 * self.rng.uniform(-1, 1))
        return replace(
            tick, sm_active_pct=sm, sm_occupancy_pct=sm * 0.6, tensor_active_pct=sm * 0.8, dram_active_pct=20 + sm / 4
        )


PEAK_TFLOPS = 989.0  # H100 SXM, bf16 dense: what the synthetic MFU is a share of


def main(argv: list[str] | None = None) -> int:
    import argparse

    from gpudash.tui.app import GpuDashApp

    ap = argparse.ArgumentParser(prog="python -m gpudash.tui.demo")
    ap.add_argument("--gpu", action="store_true", help="pretend there is a GPU with NVML")
    ap.add_argument("--gpm", action="store_true", help="with a Hopper's GPM figures and model FLOPs (implies --gpu)")
    ap.add_argument("--workload", default="encdec")
    args = ap.parse_args(argv)
    src = SyntheticSource(RunConfig(workload=args.workload), gpu=args.gpu or args.gpm, gpm=args.gpm)
    return int(GpuDashApp(src).run() or 0)


if __name__ == "__main__":
    sys.exit(main())
