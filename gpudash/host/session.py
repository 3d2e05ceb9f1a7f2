"""One running engine: the workload child plus NVML telemetry, behind ``EngineSource``.

Torch-free and Textual-free: the recorder and the dashboard both listen to an
``EngineSession``. Times in every message are seconds since the session was created.
"""

from __future__ import annotations

import os
import time
from dataclasses import replace

from gpudash.core import procgroup
from gpudash.core.protocol import Control, Event, EventKind, GpuInfo, Message, RunConfig, Sample, SourceInfo
from gpudash.core.start_note import StartNote
from gpudash.diagnosis.telemetry import RecentTicks
from gpudash.host.devices import cuda_index_hint
from gpudash.host.noise import NoiseProbe
from gpudash.host.nvml import NvmlSampler
from gpudash.host.runner import WorkloadRunner


class EngineSession:
    """``EngineSource`` implementation: ``start()``, ``send()``, ``poll()``, ``restart()``, ``stop()``."""

    def __init__(
        self, config: RunConfig, *, log_path: str | os.PathLike[str] | None = None, sampler: NvmlSampler | None = None
    ) -> None:
        self.config = config
        self.t0 = time.monotonic()
        self.runner = WorkloadRunner(config, log_path, t0=self.t0)
        self.sampler = sampler or NvmlSampler(
            cuda_index_hint(config.device), config.gpu_interval_s, t0=self.t0, gpus=config.gpus
        )
        self.sampler.t0 = self.t0
        self._nvml_started = False
        self.noise = NoiseProbe()  # what makes the samples noisy: stamped on each (``Sample.noise``)
        # the child's last "started" event (torch version, device, GPU, pid): for the metadata of a
        # recording begun mid-run
        self.started_event: Event | None = None
        self.ticks = RecentTicks()  # a diagnosis is judged with NVML's tick from before its window

    @property
    def log_path(self) -> str:
        """Where the workload child's stdout/stderr go."""
        return self.runner.log_path

    @property
    def info(self) -> SourceInfo:
        return SourceInfo(log_path=self.log_path, started=self.started_event)

    @property
    def gpu_info(self) -> GpuInfo:
        return self.sampler.info

    @property
    def alive(self) -> bool:
        return self.runner.alive

    @property
    def finished(self) -> bool:
        """The child has exited and ``poll()`` has reported how ("stopped" or "crashed")."""
        return self.runner.finished

    def start(self) -> None:
        """Start NVML (once) and the workload child."""
        if not self._nvml_started:
            self._nvml_started = True
            self.sampler.start()
        self.runner.start()

    def send(self, control: Control) -> None:
        self.runner.send(control)

    def poll(self) -> list[Message]:
        """Child messages and new GPU samples since the last poll, oldest first; never blocks."""
        msgs: list[Message] = self.runner.poll()
        for m in msgs:
            if isinstance(m, Event) and m.kind == EventKind.STARTED:
                self.started_event = m
                if isinstance(m.data, StartNote) and m.data.gpu_uuid:
                    self.sampler.select(uuid=m.data.gpu_uuid)  # the GPU the child really uses
        msgs.extend(self.sampler.drain())
        msgs.sort(key=lambda m: m.time_s)  # stable: same-time messages keep their order
        msgs = self.ticks.through(msgs, self.sampler.info)
        if any(isinstance(m, Sample) for m in msgs):
            noise = self._noise()
            msgs = [replace(m, noise=noise) if isinstance(m, Sample) and noise else m for m in msgs]
        return msgs

    def _noise(self) -> str:
        """What makes the measurement noisy now (``gpudash.host.noise``); ``""``: quiet."""
        pid = self.runner.pid
        return self.noise.read(lambda: procgroup.members(pid) if pid is not None else [], self.sampler.latest)

    def restart(self) -> None:
        """Start a fresh child in the last configuration seen running (NVML keeps sampling)."""
        if not self._nvml_started:
            self._nvml_started = True
            self.sampler.start()
        self.runner.restart()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the child (waiting up to ``timeout`` s for it to stop itself; 0: terminate it
        now) and the NVML thread. Idempotent; the last messages stay pollable."""
        self.runner.stop(timeout)  # cheap when already stopped
        self.sampler.stop()
        self._nvml_started = False
