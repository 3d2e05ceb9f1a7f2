"""What a headless recording (``gpudash.recording.headless``) asks of its live source. Torch-free."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from gpudash.core.protocol import Control, GpuInfo, Message

if TYPE_CHECKING:  # pragma: no cover
    from gpudash.host.nvml import NvmlSampler


class RecordedSession(Protocol):
    """What a headless recording asks of its live source: a family's ``EngineSession`` or a
    job's ``JobSession``."""

    sampler: NvmlSampler

    @property
    def gpu_info(self) -> GpuInfo: ...

    @property
    def log_path(self) -> str | None: ...

    @property
    def finished(self) -> bool: ...

    def start(self) -> None: ...

    def send(self, control: Control) -> None: ...

    def poll(self) -> list[Message]: ...

    def stop(self, timeout: float = 10.0) -> None: ...
