"""The dashboard's own recording (``c``, ``DashRecording``): every message the dashboard takes in,
written to a CSV in ``gpudash --record``'s format from the moment it starts, with the run as it
stood then in its metadata. A write that fails (a full disk) stops the recording, never the
dashboard.

A part of ``gpudash.tui.controller.DashController`` (its ``recording``), apart because it is a job
of its own; it reads the run through ``RecordedRun``. Textual-free.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from gpudash.core.protocol import EngineSource, Message, RunConfig
from gpudash.tui.notices import Notice, Severity, error
from gpudash.tui.state import DashState

RecorderFactory = Callable[..., Any]  # (path, metadata) -> a recorder with on_message/close


def default_recorder(path: str, metadata: dict[str, Any]) -> Any:
    from gpudash.recording.record import CsvRecorder  # the engine's recorder: same format as --record

    return CsvRecorder(path, metadata)


class RecordedRun(Protocol):
    """What the recording reads of the run (``DashController``'s)."""

    state: DashState
    config: RunConfig
    source: EngineSource


class DashRecording:
    """The recorder while ``c`` records (None: not recording), its file and the messages written."""

    def __init__(self, run: RecordedRun, factory: RecorderFactory | None = None) -> None:
        self.run = run
        self.factory = factory or default_recorder
        self.recorder: Any = None
        self.path: str | None = None
        self.written = 0

    def start(self, path: str) -> Notice:
        from gpudash.recording.metadata import dashboard_metadata

        s, config = self.run.state, self.run.config
        meta = dashboard_metadata(
            config,
            s.gpu_info,
            self.run.source.info.started,
            device=s.device,
            run_s=s.time_s,
            running={
                "workload": s.run.workload,
                "variant": s.run.variant,
                "batch_size": s.run.batch_size,
                "knobs": s.run.knobs,
            },
        )
        try:
            self.recorder = self.factory(path, meta)
        except Exception as exc:  # noqa: BLE001
            self.recorder = None
            return error(f"✗ cannot record to {path}: {exc}")
        self.path = path
        self.written = 0
        return Notice(f"● recording to {path} (c stops)")

    def write(self, msg: Message) -> Notice | None:
        """``msg`` into the recording, if one is under way; a failure stops it (its notice)."""
        if self.recorder is None:
            return None
        try:
            self.recorder.on_message(msg)
            self.written += 1
        except Exception as exc:  # noqa: BLE001 - a full disk must not stop the dashboard
            return self.stop(f"recording stopped: {exc}", Severity.ERROR)
        return None

    def stop(self, note: str | None = None, severity: Severity = Severity.INFO) -> Notice:
        rec, self.recorder = self.recorder, None
        note = note or f"saved {self.path} ({self.written} messages)"
        if rec is not None:
            try:
                rec.close()
            except Exception as exc:  # noqa: BLE001
                note, severity = f"closing the recording failed: {exc}", Severity.ERROR
        self.path = None
        return Notice(note, severity, toast=True)
