"""An event's details and typed data in a recording: one JSON object in the ``event_data`` column,
read back whole (``encode``/``decode``), so a replayed event is the event that was recorded and
nothing is parsed back out of its prose. Each kind of typed data is known here by its ``KIND``."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from gpudash.core.events import Event, Payload
from gpudash.core.goodput import Goodput
from gpudash.core.job_settings import JobSettings
from gpudash.core.stage_times import StageTimes
from gpudash.core.world_event import WorldFacts
from gpudash.diagnosis.judge import Findings, Judgement

PAYLOADS: dict[str, Callable[[dict[str, Any]], Payload]] = {
    Findings.KIND: Findings.from_dict,
    Judgement.KIND: Judgement.from_dict,
    JobSettings.KIND: JobSettings.from_dict,
    Goodput.KIND: Goodput.from_dict,
    StageTimes.KIND: StageTimes.from_dict,
    WorldFacts.KIND: WorldFacts.from_dict,
}


def encode(event: Event) -> str:
    """The event's details and its data as one JSON object ("" where it has neither)."""
    out: dict[str, Any] = {}
    if event.details:
        out["details"] = event.details
    if event.data is not None:
        out["data"] = {"kind": event.data.KIND, **event.data.as_dict()}
    return json.dumps(out, separators=(",", ":"), ensure_ascii=False) if out else ""


def decode(text: str) -> tuple[dict[str, str], Payload | None]:
    """``encode``'s details and data back; ValueError where the cell is not theirs (a hostile file)."""
    if not text:
        return {}, None
    try:
        obj = json.loads(text)
        details = obj.get("details", {})
        if not isinstance(details, dict) or not all(isinstance(v, str) for v in details.values()):
            raise ValueError("its details are not text")
        data = obj.get("data")
        if data is None:
            return {str(k): v for k, v in details.items()}, None
        kind = data.pop("kind")
        return {str(k): v for k, v in details.items()}, PAYLOADS[kind](data)
    except (AttributeError, KeyError, TypeError, RecursionError) as exc:
        raise ValueError(f"event_data is not an event's: {exc!r}") from exc
