"""An older recording's events, read as their file format's older version: before the
configuration (``Running``), the compile events (``CompileNote``), the world event
(``WorldFacts``), the FLOPs count (``FlopsNote``), the memory (``MemoryNote``), a profiler
window's figures (``TraceNote``), run.json's objects (``RunFacts``), a phase's seconds
(``PhaseSpan``, in its ``after``) and a stall's report (``StallReport``) had their objects in the
``event_data`` column, their details or words named them (a world event before that column: its
message). Only ``recording.event_data.decode`` calls these, for a cell without the object; no
reader of a newer recording parses details or words."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from gpudash.core.compile_note import CompileNote
from gpudash.core.compile_table import COMPILE_WHATS
from gpudash.core.events import FLOPS, MEMORY, OUT_OF_MEMORY, PROCESSES, SHAPES, TRACE, WORLD, EventKind, Payload
from gpudash.core.flops_note import FlopsNote
from gpudash.core.goodput import PhaseSpan, StallReport
from gpudash.core.lenient import float_or, float_or_none, int_or
from gpudash.core.memory_kinds import KINDS
from gpudash.core.memory_note import COUNTER_KEYS, MemoryNote
from gpudash.core.run_facts import RunFacts
from gpudash.core.running import NO_KNOBS, Running
from gpudash.core.trace_note import TraceNote
from gpudash.core.world_event import CLOCK_WORDS, GPU_WORDS, WorldFacts

Said = Mapping[str, str]  # an event's kind, what, before, after and message, as its row has them
# the events whose data an older recording named in details or words
OLDER_DATA = COMPILE_WHATS | {WORLD, FLOPS, MEMORY, TRACE, SHAPES, PROCESSES, OUT_OF_MEMORY}
MFU_BLANK = "MFU blank: "  # an older "flops" event's line said why MFU was blank after these words
_CLOCK = re.compile(re.escape(CLOCK_WORDS) + r" (\d+(?:\.\d+)?)")
_HOST = re.compile(r"\(host ([^)]*)\)")
_GPUS = re.compile(re.escape(GPU_WORDS) + r"((?: \d+:\d+)+)")


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


def older_data(said: Said, details: dict[str, str]) -> Payload | None:
    """The data an older recording's event named in its details or words (None: none)."""
    what = said.get("what", "")
    if said.get("kind") == EventKind.STALLED:
        where = details.get("where", "")
        return StallReport(float_or(details.get("stalled_s")), tuple(where.split("\n")) if where else ())
    if said.get("kind") == EventKind.PHASE:
        after = said.get("after", "")
        return PhaseSpan(float_or(after) if after else None)
    if what == WORLD:
        return _world_facts(said)
    if what == FLOPS:
        return _flops_note(said, details)
    if what == MEMORY:
        return _memory_note(details)
    if what == TRACE and (details or " → " in said.get("message", "")):
        return _trace_note(said, details)
    if what in (SHAPES, PROCESSES, OUT_OF_MEMORY) and details:
        return RunFacts({k: _json_value(v) for k, v in details.items()})
    return _compile_note(details) if what in COMPILE_WHATS and details else None


def _world_facts(said: Said) -> WorldFacts:
    """A world event's facts from its words: its run (after), node (before), host, clock and GPUs."""
    message = said.get("message", "")
    clock, host, gpus = _CLOCK.search(message), _HOST.search(message), _GPUS.search(message)
    pairs = (item.split(":") for item in gpus.group(1).split()) if gpus else ()
    return WorldFacts(
        run_id=said.get("after", ""),
        clock_unix=float(clock.group(1)) if clock else None,
        node=said.get("before", ""),
        host=host.group(1) if host else "",
        rank_gpus=tuple(sorted((int(r), int(i)) for r, i in pairs)),
    )


def _flops_note(said: Said, details: dict[str, str]) -> FlopsNote:
    """A "flops" event's count from its details, and why MFU was blank from its line."""
    flops, peak = details.get("flops_per_step", ""), float_or(details.get("peak_tflops"), -1.0)
    return FlopsNote(
        int(flops) if flops.isdigit() else None,
        details.get("dtype", ""),
        peak if peak >= 0 else None,
        details.get("peak_source", ""),
        said.get("message", "").partition(MFU_BLANK)[2].strip(),
    )


def _memory_note(details: dict[str, str]) -> MemoryNote:
    """A "memory" event's bytes by kind and counter, and the rest of run.json's ``memory``, from its details."""
    names = {v: k for k, v in COUNTER_KEYS.items()}
    counts = {k.removesuffix("_bytes"): int(v) for k, v in details.items() if k.endswith("_bytes") and v.isdigit()}
    kinds = {k: n for k, n in counts.items() if k in KINDS}
    counters = {names.get(f"{k}_bytes", k): n for k, n in counts.items() if k not in KINDS}
    try:
        lines = tuple((str(w), int(n)) for w, n in json.loads(details.get("activation_lines") or "[]"))
    except (ValueError, TypeError):
        lines = ()
    fits = details.get("fits_batch", "")
    return MemoryNote(
        kinds,
        counters,
        int_or(details.get("step")),
        int_or(details.get("batch")),
        int_or(details.get("passes"), 1),
        int(fits) if fits.isdigit() else None,
        details.get("activations_not_measured", ""),
        lines,
    )


def _json_value(text: str) -> Any:
    """An older detail's value as run.json kept it: a whole number as one, a list or an object
    (JSON) as itself, else the text."""
    if text.isdecimal():
        return int(text)
    if text[:1] in "[{":
        try:
            return json.loads(text)
        except ValueError:
            return text
    return text


def _trace_note(said: Said, details: dict[str, str]) -> TraceNote:
    """A profiler window's answer from its details (its file, from its line's end before them)."""
    texts = {"trace_path", "trace_steps", "trace_wall_ms", "trace_start_s", "comm_link"}
    top = {k for k in details if k.startswith("top") and k.endswith(("_kernel", "_ms_per_step"))}
    named = {k: float_or_none(v) for k, v in details.items() if k not in texts | top}
    kernels = [(details.get(f"top{i}_kernel", ""), float_or(details.get(f"top{i}_ms_per_step"))) for i in range(1, 6)]
    return TraceNote(
        details.get("trace_path") or said.get("message", "").rpartition(" → ")[2],
        int_or(details.get("trace_steps")),
        float_or(details.get("trace_wall_ms")),
        float_or_none(details.get("trace_start_s")),
        {k: v for k, v in named.items() if v is not None},
        tuple(k for k in kernels if k[0]),
        details.get("comm_link", ""),
    )


def _compile_note(details: dict[str, str]) -> CompileNote:
    """A compile event's facts from its details."""
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
