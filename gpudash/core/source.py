"""A source of messages, as its listeners (the recorder, the dashboard) see it: ``EngineSource``,
what it says of itself (``SourceInfo``) and what its ``poll()`` gives (``Message``). Torch-free.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from gpudash.core.controls import Control
from gpudash.core.events import Event
from gpudash.core.gpu_messages import GpuInfo, GpuSample
from gpudash.core.run_config import RunConfig
from gpudash.core.samples import RankSample, Sample, SyncSites

Message = Sample | Event | GpuSample | SyncSites | RankSample


@dataclass(frozen=True)
class SourceInfo:
    """What a source says about itself besides its messages (the dashboard shows it)."""

    replay: bool = False  # a recording: read-only, no controls
    path: str | None = None  # the recording's file
    follow: bool = False  # the recording is read as it grows
    log_path: str | None = None  # where the workload process's own output goes
    started: Event | None = None  # the last "started" event (what the run said of itself at its start)
    bad_rows: int = 0  # malformed rows of a recording skipped so far
    loading: str | None = None  # a recording still being read: how far ("reading 37% of run.csv (…)")
    notes: tuple[str, ...] = ()  # one-line warnings to tell once it has started (a metadata file ignored)


class EngineSource(Protocol):
    """What the recorder and the dashboard listen to: a running workload plus GPU telemetry."""

    config: RunConfig

    @property
    def gpu_info(self) -> GpuInfo:
        """What NVML says of the GPU watched (read-only here: a source may compute it)."""
        ...

    @property
    def info(self) -> SourceInfo: ...

    def start(self) -> None: ...

    def send(self, control: Control) -> None: ...

    def poll(self) -> list[Message]:
        """Everything that arrived since the last poll, oldest first; never blocks."""
        ...

    @property
    def alive(self) -> bool: ...

    def restart(self) -> None: ...

    def stop(self) -> None:
        """Stop the child (and NVML thread): join with timeout, then terminate. Idempotent."""
        ...
