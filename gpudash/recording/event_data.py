"""An event's details, configuration and typed data in a recording: one JSON object in the
``event_data`` column, read back whole (``encode``/``decode``), so a replayed event is the event that
was recorded and nothing is parsed back out of its prose. Each kind of typed data is known here by
its ``KIND``; the configuration (``Running``) is its own object.

A recording made before the configuration had its object (gpudash 0.1.0 up to session 30's) named it
in the details' text: ``decode`` reads that form, and only that, as a file format's older version
(``_older_running``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from gpudash.core.compile_note import CompileNote
from gpudash.core.events import Event, Payload
from gpudash.core.goodput import Goodput
from gpudash.core.job_settings import JobSettings
from gpudash.core.running import NO_KNOBS, Running
from gpudash.core.stage_times import StageTimes
from gpudash.core.world_event import WorldFacts
from gpudash.diagnosis.judge import Findings, Judgement
from gpudash.diagnosis.memory_peak import PeakAnswer

PAYLOADS: dict[str, Callable[[dict[str, Any]], Payload]] = {
    Findings.KIND: Findings.from_dict,
    Judgement.KIND: Judgement.from_dict,
    JobSettings.KIND: JobSettings.from_dict,
    Goodput.KIND: Goodput.from_dict,
    StageTimes.KIND: StageTimes.from_dict,
    WorldFacts.KIND: WorldFacts.from_dict,
    PeakAnswer.KIND: PeakAnswer.from_dict,
    CompileNote.KIND: CompileNote.from_dict,
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
    return json.dumps(out, separators=(",", ":"), ensure_ascii=False) if out else ""


def decode(text: str) -> tuple[dict[str, str], Running | None, Payload | None]:
    """``encode``'s details, configuration and data back; ValueError where the cell is not theirs
    (a hostile file)."""
    if not text:
        return {}, None, None
    try:
        obj = json.loads(text)
        details = obj.get("details", {})
        if not isinstance(details, dict) or not all(isinstance(v, str) for v in details.values()):
            raise ValueError("its details are not text")
        details = {str(k): v for k, v in details.items()}
        if "running" in obj:
            running = Running.from_dict(obj["running"]) if obj["running"] is not None else None
        else:
            running = _older_running(details)
        data = obj.get("data")
        if data is None:
            return details, running, None
        kind = data.pop("kind")
        return details, running, PAYLOADS[kind](data)
    except (AttributeError, KeyError, TypeError, RecursionError) as exc:
        raise ValueError(f"event_data is not an event's: {exc!r}") from exc


def _older_running(details: dict[str, str]) -> Running | None:
    """The configuration an older recording's details named in text (None: they name none)."""
    if not details.get("workload"):
        return None

    def whole(key: str, default: int) -> int:
        text = details.get(key, "").strip()
        return int(text) if text.isdigit() else default

    names = {k: details.get(k, "") for k in ("workload", "variant", "device")}
    knobs = details.get("knobs") or NO_KNOBS
    return Running(**names, knobs=knobs, batch_size=whole("batch_size", 0), world_size=whole("world_size", 1))
