"""An older recording's events, read as their file format's older version: before the
configuration (``Running``) and the compile events (``CompileNote``) had their objects in the
``event_data`` column, their details named them in text. Only ``recording.event_data.decode``
calls these, for a cell without the object; no reader of a newer recording parses details."""

from __future__ import annotations

from gpudash.core.compile_note import CompileNote
from gpudash.core.compile_table import COMPILE_WHATS
from gpudash.core.lenient import float_or, int_or
from gpudash.core.running import NO_KNOBS, Running


def older_running(details: dict[str, str]) -> Running | None:
    """The configuration an older recording's details named (None: they name none)."""
    if not details.get("workload"):
        return None

    def whole(key: str, default: int) -> int:
        text = details.get(key, "").strip()
        return int(text) if text.isdigit() else default

    names = {k: details.get(k, "") for k in ("workload", "variant", "device")}
    knobs = details.get("knobs") or NO_KNOBS
    return Running(**names, knobs=knobs, batch_size=whole("batch_size", 0), world_size=whole("world_size", 1))


def older_compile_note(what: str, details: dict[str, str]) -> CompileNote | None:
    """The facts an older recording's compile event named in its details (None: not a compile
    event's, or none named)."""
    if what not in COMPILE_WHATS or not details:
        return None
    text = {k: details.get(k, "") for k in ("id", "file", "reason", "cause", "fix", "raw")}
    return CompileNote(
        fn=details.get("fn", "?"),
        line=int_or(details.get("line")),
        step=int_or(details.get("step")),
        seconds=float_or(details.get("seconds")),
        count=int_or(details.get("count")),
        backward=bool(details.get("backward")),
        quiet=bool(details.get("quiet")),
        cause_kind=details.get("kind", ""),
        **text,
    )
