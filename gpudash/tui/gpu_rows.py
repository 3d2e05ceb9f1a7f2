"""The per-GPU rows: a line per GPU watched (index, kernel-active %, memory, power, SM clock,
temperature), the workload's GPU marked ▶ and in bold; a GPU NVML gives nothing for reads n/a.

Shown when there is more than the workload's own GPU to show (a 1-GPU box has its figures in
the header already). On a short terminal more than ``SHORT_LINES`` GPUs share lines, in a
compact form, so the charts keep their room.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence

from rich.text import Text
from textual.widgets import Static

from gpudash.core.protocol import GpuInfo, GpuReading, GpuSample
from gpudash.tui.layout import TALL

SHORT_LINES = 4  # at most this many lines on a terminal of fewer than ``TALL`` rows
TALL_LINES = 8
BAR_CELLS = 8  # the util bar's width
NA = "n/a"


def workload_gpus(info: GpuInfo | None, readings: Sequence[GpuReading] = (), ranks: int = 1) -> frozenset[int]:
    """The GPUs the workload runs on (highlighted): the one the sampler charts; in a data-parallel
    run of ``ranks`` ranks (rank r on cuda:r), the first ``ranks`` GPUs sampled, which follow
    CUDA_VISIBLE_DEVICES' order as the ranks' devices do."""
    own = frozenset() if info is None or info.index is None else frozenset({info.index})
    if ranks > 1 and len(readings) >= ranks:
        return own | frozenset(r.index for r in readings[:ranks])
    return own


def _num(value: float | None, fmt: str, width: int, unit: str = "") -> str:
    return (NA if value is None else format(value, fmt) + unit).rjust(width)


def _bar(util: float | None) -> Text:
    if util is None:
        return Text(" " * (BAR_CELLS + 2))
    eighths = round(max(0.0, min(100.0, util)) / 100 * BAR_CELLS * 8)
    full, part = divmod(eighths, 8)
    cells = "█" * full + (" ▏▎▍▌▋▊▉"[part] if part else "")
    return Text.assemble("▕", (cells.ljust(BAR_CELLS), "green"), "▏")


def _memory(r: GpuReading, compact: bool) -> str:
    if r.mem_used_mib is None:
        return NA.rjust(6 if compact else 12)
    used = r.mem_used_mib / 1024
    if r.mem_total_mib:  # a replay has the used memory only
        text = (
            f"{used:.1f}/{r.mem_total_mib / 1024:.0f}G" if compact else f"{used:5.1f}/{r.mem_total_mib / 1024:.0f} GiB"
        )
    else:
        text = f"{used:.1f}G" if compact else f"{used:5.1f} GiB"
    return text.rjust(7) if compact else text.ljust(12)


def gpu_entry(r: GpuReading, workload: bool, compact: bool = False) -> Text:
    """One GPU: ``▶ GPU 0 ▕█████▌  ▏  70% · mem   3.0/80 GiB ·  250 W · 1980 MHz ·  61°C``; compact:
    ``▶0  70% 3.0/80G 250W 1980MHz 61°C``; ``GPU 2 n/a`` when NVML answered nothing for it."""
    mark = Text("▶" if workload else " ", style="bold cyan")
    name = f"{r.index}" if compact else f" GPU {r.index:<2}"
    style = "bold" if workload else ""
    if not r.answered:
        why = " n/a" if compact else f" {NA}: NVML gives no reading for this GPU"
        return Text.assemble(mark, (name, style), (why, "yellow"))
    util = _num(r.gpu_util_pct, ".0f", 4, "%")
    if compact:
        parts = [
            util,
            _memory(r, True),
            _num(r.power_w, ".0f", 4, "W"),
            _num(r.sm_clock_mhz, ".0f", 7, "MHz"),
            _num(r.temp_c, ".0f", 4, "°C"),
        ]
        return Text.assemble(mark, (name, style), (" " + " ".join(parts), style))
    parts = [
        f"mem {_memory(r, False)}",
        _num(r.power_w, ".0f", 5, " W"),
        _num(r.sm_clock_mhz, ".0f", 8, " MHz"),
        _num(r.temp_c, ".0f", 5, "°C"),
    ]
    return Text.assemble(mark, (name, style), " ", _bar(r.gpu_util_pct), (f"{util} · " + " · ".join(parts), style))


def gpu_rows(readings: Sequence[GpuReading], workload: Collection[int], max_lines: int) -> Text:
    """The rows' text: a line per GPU, or (more GPUs than ``max_lines``) several per line, compact."""
    per_line = max(1, math.ceil(len(readings) / max(1, max_lines)))
    entries = [gpu_entry(r, r.index in workload, compact=per_line > 1) for r in readings]
    width = max((e.cell_len for e in entries), default=0)
    for e in entries:
        e.pad_right(width - e.cell_len)  # aligned, also when they share a line
    lines = [Text("  ").join(entries[start : start + per_line]) for start in range(0, len(entries), per_line)]
    out = Text("\n").join(lines)
    out.no_wrap, out.overflow = True, "ellipsis"
    return out


def worth_showing(gpu: GpuSample | None, workload: Collection[int]) -> bool:
    """More than the workload's own GPU to show (that one's figures are in the header)."""
    readings = gpu.per_gpu if gpu is not None else ()
    return len(readings) > 1 or any(r.index not in workload for r in readings)


class GpuRows(Static):
    """The per-GPU rows, above the charts; hidden while there is nothing beyond the header's GPU."""

    DEFAULT_CSS = """
    GpuRows { height: auto; padding: 0 1; }
    """

    lines = 0  # the lines shown (0: hidden); the app's layout gives the charts what is left

    def show(
        self, gpu: GpuSample | None, info: GpuInfo | None, *, height: int, stale: bool = False, ranks: int = 1
    ) -> bool:
        """``gpu``: the newest NVML sample; ``height``: the terminal's rows; ``stale``: NVML has
        stopped answering (the old figures are hidden); ``ranks``: a data-parallel run's ranks.
        True when the rows took lines or gave them back (the charts' layout must follow)."""
        before = self.lines
        workload = workload_gpus(info, gpu.per_gpu if gpu is not None else (), ranks)
        shown = not stale and gpu is not None and worth_showing(gpu, workload)
        self.display = shown
        if not shown or gpu is None:
            self.lines = 0
            return self.lines != before
        text = gpu_rows(gpu.per_gpu, workload, TALL_LINES if height >= TALL else SHORT_LINES)
        self.lines = len(text.plain.split("\n"))
        self.update(text)
        return self.lines != before
