"""The dashboard's memory bar: what a job's memory holds, stacked by kind — parameters, frozen
parameters, gradients, optimizer state, activations, then the rest the allocator (on the CPU, the process) holds —
against the GPU's total, its peak marked; from the latest ``measured`` event of ``what`` "memory"
(``gpudash.job.memory``). One line in the stats panel's top border: ``mem █▓▒░·┃  41.2/79.6 GiB``."""

from __future__ import annotations

import math

from rich.text import Text

from gpudash.core.memory_kinds import KINDS, size
from gpudash.core.memory_note import MemoryNote
from gpudash.core.protocol import Event, GpuSample, Sample

WIDTH = 20  # cells of the bar
GLYPHS = {  # each kind's glyph and colour
    "params": ("█", "blue"),
    "frozen": ("▇", "bright_black"),
    "grads": ("▓", "cyan"),
    "optimizer": ("▒", "magenta"),
    "activations": ("░", "yellow"),
}
REST = ("·", "white")  # allocated (or resident) beyond the kinds counted
PEAK = "┃"


def sample_note(s: Sample | None, gpu: GpuSample | None) -> MemoryNote | None:
    """A family's memory from its sample (its kinds, the allocator's allocated) and NVML's total of
    the GPU: the bar of gpudash's own workloads (None: no kinds on the sample)."""
    if s is None or s.mem_params_mib is None:
        return None
    kinds = {"params": s.mem_params_mib, "grads": s.mem_grads_mib, "optimizer": s.mem_optimizer_mib}
    counters = {"allocated": s.cuda_allocated_mib, "total": gpu.mem_total_mib if gpu is not None else None}
    return MemoryNote(_bytes(kinds), _bytes(counters))


def memory_bar(e: Event | MemoryNote | None, width: int = WIDTH) -> Text | None:
    """The bar of memory event ``e`` (or its note) (None: nothing, or nothing to draw against)."""
    note = e.data if isinstance(e, Event) else e
    if not isinstance(note, MemoryNote):
        return None
    kinds = {k: n for k in KINDS if (n := note.kinds.get(k)) is not None}
    c = note.counters
    total = c.get("total")
    held = c.get("allocated") if total else c.get("rss")
    peak = c.get("peak") if total else None
    whole = total or held
    if not kinds or not whole:
        return None
    cells: list[tuple[str, str]] = []
    for kind, n in kinds.items():
        cells += [GLYPHS[kind]] * _cells(n, whole, width)
    rest = max(0, (held or 0) - sum(kinds.values()))
    cells += [REST] * _cells(rest, whole, width)
    cells = cells[:width] + [(" ", "")] * max(0, width - len(cells))
    if peak:
        at = min(width - 1, max(0, round(peak / whole * width) - 1))
        cells[at] = (PEAK, "bold red")
    bar = Text("mem ", style="bold")
    for glyph, style in cells:
        bar.append(glyph, style=style)
    if total:
        figure = f" {size(peak)} peak of {size(total)}" if peak else f" {size(held or 0)} allocated of {size(total)}"
    else:
        figure = f" {size(held or 0)} resident"
    return bar.append(figure, style="bold")


def _cells(n: int, whole: int, width: int) -> int:
    """Cells of ``n`` bytes out of ``whole``: at least one for anything held."""
    return min(width, max(1, round(n / whole * width))) if n > 0 else 0


def _bytes(mib: dict[str, float | None]) -> dict[str, int]:
    """MiB by name as bytes (a name not measured, or not finite, left out)."""
    return {k: int(v * 2**20) for k, v in mib.items() if v is not None and 0 <= v < math.inf}
