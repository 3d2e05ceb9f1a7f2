"""A job that died of an out-of-memory error, explained: where (the job's own line, the step, the
phase), what the memory held then (by kind, and the allocator's counters), and what would free it,
largest first — each remedy only where the job does not already do it, with the bytes it would
free estimated from what was measured. Torch-free; the figures come from the hooks
(``gpudash/boot/gpudash_boot/oom_watch.py``: ``OomWatch``)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from gpudash.core.lenient import int_or_none
from gpudash.core.memory_kinds import KINDS, NAMES, byte_count, size
from gpudash.core.textfmt import strip_controls

HALF = 0.5  # of the activations saved for backward, 16-bit floats' share at which the job is mixed-precision
FRAGMENTED = 0.05  # reserved but not allocated, share of the GPU at which expandable segments are advised


@dataclass(frozen=True)
class Remedy:
    what: str
    frees: int  # bytes, estimated

    def words(self) -> str:
        return f"{self.what} (about {size(self.frees)})"


def remedies(m: dict[str, Any]) -> list[Remedy]:
    """What would free memory, largest first, from the hooks' out-of-memory message ``m``."""
    acts = _bytes(m, "activations")
    if acts is None and (allocated := _bytes(m, "allocated")) is not None:
        acts = max(0, allocated - sum(_bytes(m, k) or 0 for k in ("params", "grads", "optimizer")))
    out: list[Remedy] = []
    if acts:
        out.append(Remedy("activation checkpointing of the largest blocks (torch.utils.checkpoint)", int(acts * 0.7)))
        half = m.get("half_share")
        if not isinstance(half, (int, float)) or half < HALF:
            where = "" if isinstance(half, (int, float)) else ", if it has none"
            out.append(Remedy(f"bf16 autocast for the forward and the loss{where}", acts // 2))
        out.append(
            Remedy("half the batch, with 2 steps of gradient accumulation for the same effective batch", acts // 2)
        )
    reserved, allocated, total = _bytes(m, "reserved"), _bytes(m, "allocated"), _bytes(m, "total")
    conf = str(m.get("alloc_conf") or "")
    if reserved is not None and allocated is not None and "expandable_segments:True" not in conf:
        loose = reserved - allocated
        if total and loose >= FRAGMENTED * total:
            out.append(Remedy("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (reserved but not allocated)", loose))
    if optimizer := _bytes(m, "optimizer"):
        out.append(Remedy("the optimizer's state in bf16 or 8 bits", optimizer // 2))
    return sorted(out, key=lambda r: r.frees, reverse=True)


def explained(m: dict[str, Any]) -> str:
    """One paragraph: where, what the memory held, what would free it."""
    where = (
        f"{strip_controls(_short(str(m['file'])))}:{_line(m.get('line'))}"
        if m.get("file")
        else "a line of a library's (none of the job's own in the traceback)"
    )
    phase = strip_controls(str(m.get("phase") or "training"))[:40]
    rank = f"rank {m['rank']}, " if int(m.get("world", 1) or 1) > 1 else ""
    thread = f"thread {strip_controls(str(m['thread']))[:80]}, " if m.get("thread") else ""
    text = f"out of memory at {where} ({rank}{thread}step {m.get('step', '?')}, {phase})"
    if m.get("code"):
        text += f": {strip_controls(str(m['code']))[:200]}"
    held = []
    if (tried := _bytes(m, "tried")) is not None:
        held.append(f"it tried to allocate {size(tried)}")
    if (allocated := _bytes(m, "allocated")) is not None:
        total = _bytes(m, "total")
        held.append(f"{size(allocated)}{f' of {size(total)}' if total else ''} allocated")
        if (reserved := _bytes(m, "reserved")) is not None:
            held[-1] += f", {size(reserved)} reserved"
    kinds = [f"{NAMES[k]} {size(v)}" for k in KINDS if (v := _bytes(m, k)) is not None]
    if kinds:
        step = (
            f" (activations: saved for backward in step {m['activations_step']})" if m.get("activations_step") else ""
        )
        held.append(" · ".join(kinds) + step)
    lines = [r for r in m.get("lines") or [] if isinstance(r, list) and len(r) == 2 and isinstance(r[1], int)]
    if lines:
        held.append(
            "the lines that made them: " + "; ".join(f"{strip_controls(str(w))} {size(n)}" for w, n in lines[:5])
        )
    if held:
        text += " — " + "; ".join(held)
    if found := remedies(m):
        text += ". What would free it, largest first: " + "; ".join(r.words() for r in found)
    return text


def _short(path: str) -> str:
    """A path as the user typed it: relative to the working folder where it is inside it."""
    try:
        relative = os.path.relpath(path)
    except ValueError:
        return path
    return path if relative.startswith("..") else relative


def _bytes(m: dict[str, Any], key: str) -> int | None:
    return byte_count(m.get(key))


def _line(value: Any) -> str:
    """A line number as the message gave it, ``?`` where it gave none."""
    line = int_or_none(value)
    return "?" if line is None else str(line)
