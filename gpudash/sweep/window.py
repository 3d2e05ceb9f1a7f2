"""What one sweep measurement keeps: a configuration × repeat's ``Window`` of samples after its
warm-up, and the sweep's ``Clock`` (``--max-minutes``)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from gpudash.core.protocol import GpuSample, Sample
from gpudash.sweep.plan import Configuration
from gpudash.sweep.results import RepeatResult


@dataclass
class Window:
    """The samples of one configuration × repeat, kept from ``start_s`` (session time) on."""

    config: Configuration
    start_s: float
    seconds: float
    samples: list[Sample] = field(default_factory=list)
    gpu: list[GpuSample] = field(default_factory=list)
    measured_s: float = 0.0

    @property
    def full(self) -> bool:
        """The kept samples span ``seconds``."""
        return self.measured_s >= self.seconds - 1e-9

    def offer(self, msg: Sample | GpuSample) -> None:
        """Keep a sample of this configuration that began after the warm-up, until full."""
        if self.full:
            return
        if isinstance(msg, GpuSample):
            if msg.time_s >= self.start_s:
                self.gpu.append(msg)
            return
        c = self.config
        if (msg.workload, msg.variant, msg.batch_size, msg.knobs) != (c.family, c.variant, c.batch_size, c.knobs):
            return
        if msg.time_s - msg.interval_s >= self.start_s - 1e-6:
            self.samples.append(msg)
            self.measured_s += msg.interval_s

    def result(self, repeat: int) -> RepeatResult:
        """The kept samples, and the NVML ticks up to the last of them."""
        end = self.samples[-1].time_s if self.samples else self.start_s
        gpu = tuple(g for g in self.gpu if g.time_s <= end)
        return RepeatResult(self.config, repeat, tuple(self.samples), gpu)


@dataclass
class Clock:
    """The sweep's deadline (``--max-minutes``) from its start."""

    max_minutes: float
    start: float = field(default_factory=time.monotonic)

    @property
    def up(self) -> bool:
        """``--max-minutes`` have passed."""
        return time.monotonic() - self.start >= self.max_minutes * 60
