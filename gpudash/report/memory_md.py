"""``report``'s account of a job's memory: per run, what it held by kind, its peak and what would
fit (run.json's ``memory``), and why it ran out where it did (``out_of_memory``); between runs, the
kinds side by side — an A/B of a batch size or of autocast reads there. Torch-free."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpudash.core.memory_kinds import KINDS, NAMES, byte_count, size
from gpudash.core.textfmt import strip_controls

COLUMNS = (*(f"{k}_bytes" for k in KINDS), "peak_allocated_bytes", "total_bytes", "rss_bytes")
HEADINGS = {**{f"{k}_bytes": NAMES[k] for k in KINDS}, "peak_allocated_bytes": "peak allocated"}
HEADINGS |= {"total_bytes": "GPU total", "rss_bytes": "resident set"}


def figures(meta: dict[str, Any]) -> dict[str, int]:
    """The run's memory figures (bytes) from its metadata, the numbers alone (a hostile file's text left out)."""
    memory = meta.get("memory")
    if not isinstance(memory, dict):
        return {}
    return {k: n for k in COLUMNS if (n := byte_count(memory.get(k))) is not None}


def section(meta: dict[str, Any]) -> list[str]:
    """A run's ``### Memory`` (none where it has no memory figures and did not run out)."""
    found = figures(meta)
    oom = meta.get("out_of_memory")
    if not found and not isinstance(oom, dict):
        return []
    lines = ["### Memory", ""]
    if found:
        lines += ["| what | bytes | |", "|---|--:|--:|"]
        lines += [f"| {HEADINGS[k]} | {v:,} | {size(v)} |" for k, v in found.items()]
        memory = _memory(meta)
        fits, batch = memory.get("fits_batch"), memory.get("batch")
        if isinstance(fits, int) and isinstance(batch, int):
            lines += ["", f"At batch {batch} a rank, a batch up to about {fits} would fit."]
        lines.append("")
    if isinstance(oom, dict) and isinstance(oom.get("message"), str):
        lines += [f"**It ran out of memory:** {strip_controls(oom['message'])}", ""]
    return lines


def table(runs: Sequence[Any]) -> list[str]:
    """The runs' memory side by side (none unless two runs or more have figures)."""
    all_figures = [figures(run.meta) for run in runs]
    if sum(1 for f in all_figures if f) < 2:
        return []
    shown = [k for k in COLUMNS if any(k in f for f in all_figures)]
    lines = ["| run | " + " | ".join(HEADINGS[k] for k in shown) + " |", "|--:|" + "--:|" * len(shown)]
    for i, f in enumerate(all_figures, start=1):
        lines.append(f"| {i} | " + " | ".join(size(f[k]) if k in f else "–" for k in shown) + " |")
    return ["### Memory", "", *lines, ""]


def as_dict(meta: dict[str, Any]) -> dict[str, Any] | None:
    """``--json``'s ``memory`` of a run: its figures, what fits, why it ran out (None: nothing known)."""
    found: dict[str, Any] = dict(figures(meta))
    memory = _memory(meta)
    for key in ("batch", "fits_batch"):
        if isinstance(memory.get(key), int):
            found[key] = memory[key]
    oom = meta.get("out_of_memory")
    if isinstance(oom, dict) and isinstance(oom.get("message"), str):
        found["out_of_memory"] = strip_controls(oom["message"])
    return found or None


def _memory(meta: dict[str, Any]) -> dict[str, Any]:
    memory = meta.get("memory")
    return memory if isinstance(memory, dict) else {}
