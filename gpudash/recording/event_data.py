"""An event's details, configuration and typed data in a recording: one JSON object in the
``event_data`` column, read back whole (``encode``/``decode``), so a replayed event is the event that
was recorded and nothing is parsed back out of its prose. Each kind of typed data is known here by
its ``KIND``; the configuration (``Running``) is its own object.

A recording made before an event's configuration or data had its object named them in the details'
text or the event's words: ``decode`` reads that form as the file format's older version
(``older_events``), and nothing else of any details."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from gpudash.core.compile_note import CompileNote
from gpudash.core.events import Event, EventKind, Payload
from gpudash.core.flops_note import FlopsNote
from gpudash.core.goodput import Goodput, PhaseSpan, StallReport
from gpudash.core.memory_note import MemoryNote
from gpudash.core.run_facts import RunFacts
from gpudash.core.running import Running
from gpudash.core.stage_times import StageTimes
from gpudash.core.start_note import StartNote
from gpudash.core.trace_note import TraceNote
from gpudash.core.world_event import WorldFacts
from gpudash.diagnosis.judge import Findings, Judgement
from gpudash.diagnosis.memory_peak import PeakAnswer
from gpudash.recording.older_events import OLDER_DATA, Said, older_data, older_running

PAYLOADS: dict[str, Callable[[dict[str, Any]], Payload]] = {
    Findings.KIND: Findings.from_dict,
    Judgement.KIND: Judgement.from_dict,
    StartNote.KIND: StartNote.from_dict,
    "job_settings": StartNote.of_settings,  # (a job's started data before ``StartNote``: its settings alone)
    Goodput.KIND: Goodput.from_dict,
    StageTimes.KIND: StageTimes.from_dict,
    WorldFacts.KIND: WorldFacts.from_dict,
    PeakAnswer.KIND: PeakAnswer.from_dict,
    CompileNote.KIND: CompileNote.from_dict,
    FlopsNote.KIND: FlopsNote.from_dict,
    MemoryNote.KIND: MemoryNote.from_dict,
    TraceNote.KIND: TraceNote.from_dict,
    RunFacts.KIND: RunFacts.from_dict,
    PhaseSpan.KIND: PhaseSpan.from_dict,
    StallReport.KIND: StallReport.from_dict,
}


def encode(event: Event) -> str:
    """The event's details, configuration and data as one JSON object ("" where it has none)."""
    out: dict[str, Any] = {}
    running, details = event.running, event.details
    shown = running.details() if running is not None else {}
    if shown and all(details.get(k) == v for k, v in shown.items()):  # its text, filled in from the object
        details = {k: v for k, v in details.items() if k not in shown}
    if details:
        out["details"] = details
    if running is not None or "workload" in details:  # (null: none, whatever the details' text names)
        out["running"] = running.as_dict() if running is not None else None
    if event.data is not None:
        out["data"] = {"kind": event.data.KIND, **event.data.as_dict()}
    elif event.what in OLDER_DATA or event.kind in (EventKind.PHASE, EventKind.STALLED):
        out["data"] = None  # (null: none, whatever its details or words name)
    return json.dumps(out, separators=(",", ":"), ensure_ascii=False) if out else ""


def decode(text: str, said: Said) -> tuple[dict[str, str], Running | None, Payload | None]:
    """``encode``'s details, configuration and data back (``said``: the event's what, before, after
    and message, for an older recording's data in words); ValueError where the cell is not theirs
    (a hostile file)."""
    try:
        obj = json.loads(text) if text else {}
        details = obj.get("details", {})
        if not isinstance(details, dict) or not all(isinstance(v, str) for v in details.values()):
            raise ValueError("its details are not text")
        details = {str(k): v for k, v in details.items()}
        if "running" in obj:
            running = Running.from_dict(obj["running"]) if obj["running"] is not None else None
        else:
            running = older_running(details)
        if "data" not in obj:
            return details, running, older_data(said, details)
        data = obj["data"]
        if data is None:
            return details, running, None
        kind = data.pop("kind")
        return details, running, PAYLOADS[kind](data)
    except (AttributeError, KeyError, TypeError, RecursionError) as exc:
        raise ValueError(f"event_data is not an event's: {exc!r}") from exc
