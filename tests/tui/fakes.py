"""A scripted ``EngineSource`` for the dashboard tests: no torch, no GPU, no threads."""

from __future__ import annotations

from dataclasses import replace

from gpudash.core.flops_note import FlopsNote
from gpudash.core.protocol import (
    Control,
    Event,
    EventKind,
    GpuInfo,
    GpuReading,
    GpuSample,
    Message,
    MigReading,
    RunConfig,
    Sample,
    SourceInfo,
)
from gpudash.core.running import Running

GPU = GpuInfo(available=True, driver="550.54.15", names=("NVIDIA H100 80GB HBM3",), index=0)
NO_GPU = GpuInfo(available=False, unavailable="NVML Shared Library Not Found (libnvidia-ml.so.1)")


class FakeSource:
    """Messages are queued by the test (``push``); ``sent`` records every control."""

    def __init__(self, config: RunConfig | None = None, gpu_info: GpuInfo = GPU) -> None:
        self.config = config or RunConfig()
        self.gpu_info = gpu_info
        self.sent: list[Control] = []
        self.queue: list[Message] = []
        self.started = 0
        self.restarted = 0
        self.stopped = 0
        self._alive = False
        self.started_event: Event | None = None  # the run's "started" event, as a session keeps it

    @property
    def info(self) -> SourceInfo:
        return SourceInfo(started=self.started_event)

    def start(self) -> None:
        self.started += 1
        self._alive = True

    def send(self, control: Control) -> None:
        self.sent.append(control)

    def poll(self) -> list[Message]:
        out, self.queue = self.queue, []
        return out

    @property
    def alive(self) -> bool:
        return self._alive

    def restart(self) -> None:
        self.restarted += 1
        self._alive = True

    def stop(self) -> None:
        self.stopped += 1
        self._alive = False

    def push(self, *messages: Message) -> None:
        self.queue.extend(messages)


def sample(
    t: float,
    steps_per_s: float,
    *,
    variant: str = "serial",
    batch: int = 8,
    workload: str = "encdec",
    steps: int | None = None,
    syncs: float | None = 0.0,
    interval: float = 0.25,
    knobs: str = "none",
) -> Sample:
    n = steps if steps is not None else int(t * steps_per_s)
    return Sample(
        t,
        workload,
        variant,
        batch,
        n,
        n * batch,
        interval,
        steps_per_s,
        steps_per_s * batch,
        1000 / steps_per_s,
        1300 / steps_per_s,
        syncs,
        knobs=knobs,
    )


def gpu(t: float, util: float = 80.0, power: float = 300.0, energy: float | None = None) -> GpuSample:
    return GpuSample(
        t, util, util / 2, 4096.0, 81559.0, power, 1980.0, 60.0, energy if energy is not None else power * t, ""
    )


def started(t: float = 1.0, variant: str = "serial", batch: int = 8, device: str = "cuda:0") -> Event:
    return Event(
        t,
        EventKind.STARTED,
        message=f"started encdec/{variant}",
        running=Running("encdec", variant, batch, device=device),
    )


def run_segment(t0: float, t1: float, rate: float, **kw) -> list[Message]:
    """Samples every 0.25 s and GPU ticks every 0.5 s over [t0, t1)."""
    out: list[Message] = []
    t = t0
    steps = kw.pop("steps0", int(t0 * rate))
    while t < t1 - 1e-9:
        t = round(t + 0.25, 3)
        steps += int(rate * 0.25)
        out.append(sample(t, rate, steps=steps, **kw))
        if round(t * 4) % 2 == 0:
            out.append(gpu(t, energy=300.0 * t))
    return out


def two_batch_run(gpu: bool = True) -> FakeSource:
    """A source holding a run at batch 4 then 8 (with NVML samples, or none on a machine without)."""
    src = FakeSource() if gpu else FakeSource(gpu_info=NO_GPU)
    src.push(
        started(1.0, batch=4, device="cuda:0" if gpu else "cpu"),
        *run_segment(1.0, 15.0, 30.0, batch=4),
        Event(15.0, EventKind.CHANGED, "batch_size", "4", "8"),
        *run_segment(15.0, 30.0, 18.0, batch=8, steps0=450),
    )
    if not gpu:
        src.queue = [m for m in src.queue if not isinstance(m, GpuSample)]
    return src


def gpm_gpu(
    t: float,
    sm: float | None,
    tensor: float | None,
    dram: float | None,
    *,
    util: float = 80.0,
    per_gpu: tuple[GpuReading, ...] = (),
    mig: tuple[MigReading, ...] = (),
) -> GpuSample:
    """An NVML tick with GPM's figures (SM, tensor and DRAM activity) of the workload's GPU."""
    return replace(
        gpu(t, util), sm_active_pct=sm, tensor_active_pct=tensor, dram_active_pct=dram, per_gpu=per_gpu, mig=mig
    )


def with_model(s: Sample, tflops: float | None, mfu: float | None) -> Sample:
    """``s`` with its model FLOPs' rate and MFU (FLOPs a step from the rate, where there is one)."""
    flops = tflops * 1e12 / s.steps_per_s if tflops is not None else None
    return replace(s, flops_per_step=flops, tflops=tflops, mfu_pct=mfu)


def flops_event(t: float, message: str) -> Event:
    """The workload's "flops" event: what a configuration's count was, or why MFU is blank (its
    line's words after "MFU blank: ", as ``engine.model_flops.describe`` writes them)."""
    note = FlopsNote(None, "bf16", None, "", blank=message.partition("MFU blank: ")[2])
    return Event(t, EventKind.MEASURED, "flops", message=message, data=note)
