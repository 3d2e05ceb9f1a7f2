"""The per-GPU rows: a line per GPU watched (index, kernel-active %, memory, power, SM clock,
temperature), the workload's GPU marked ▶ and in bold; a GPU NVML gives nothing for reads n/a.

With NVML's GPU performance monitoring (GPM, Hopper and newer) each line leads with four gauges:
"kernel ran" (NVML's utilisation: the share of time any kernel ran, however few SMs it used),
"SMs busy", "tensor" and "DRAM" (GPM: how much of the GPU the kernels used); a MIG instance gets
a labelled line of its own. Where GPM is not supported its gauges read "–" (the reason is said
once, as a notice); GPUs that share lines leave them out unless some have figures. The gauges lose
their bars, then the figures after them their spaces, where the terminal is narrow.

Shown when there is more than the workload's own GPU to show (a 1-GPU box has its figures in
the header already), or GPM figures to show. On a short terminal more than ``SHORT_LINES`` GPUs
share lines, in a compact form, so the charts keep their room.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence

from rich.text import Text
from textual.widgets import Static

from gpudash.core.protocol import GpuInfo, GpuReading, GpuSample, MigReading
from gpudash.tui.layout import TALL

SHORT_LINES = 4  # at most this many lines on a terminal of fewer than ``TALL`` rows
TALL_LINES = 8
BAR_CELLS = 8  # the util bar's width
GAUGE_CELLS = 4  # a GPM line's gauges' width
GPM_FORMS = 3  # a GPM line's forms, the widest first (``gpm_entry``)
NA = "n/a"
DASH = "–"  # a GPM figure not available
# the GPM figures of a line: (field, label with gauges, compact label, colour)
GPM_GAUGES = (
    ("sm_active_pct", "SMs busy", "SM", "cyan"),
    ("tensor_active_pct", "tensor", "tensor", "magenta"),
    ("dram_active_pct", "DRAM", "DRAM", "yellow"),
)
GAUGE_KEYS = tuple(g[0] for g in GPM_GAUGES)
GPM_EXPLAINED = (
    "kernel ran: NVML's utilisation — the share of time ANY kernel ran, even one that keeps a "
    "single SM busy (a loop of tiny kernels reads high). SMs busy (GPM): the share of the SMs' time "
    "they were busy — what 'GPU-bound' means. tensor: the SMs' time any tensor core ran. DRAM: the "
    "memory bandwidth used over its maximum. – : GPM not available (Hopper and newer)."
)


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


def _bar(util: float | None, cells: int = BAR_CELLS, colour: str = "green") -> Text:
    if util is None:
        return Text(" " * (cells + 2))
    eighths = round(max(0.0, min(100.0, util)) / 100 * cells * 8)
    full, part = divmod(eighths, 8)
    filled = "█" * full + (" ▏▎▍▌▋▊▉"[part] if part else "")
    return Text.assemble("▕", (filled.ljust(cells), colour), "▏")


def _pct(value: float | None) -> str:
    """A GPM figure, 4 wide: " 82%", or "   –" where not available."""
    return (DASH if value is None else f"{value:.0f}%").rjust(4)


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


def _gauges(values: Sequence[float | None], labels: Sequence[str], colours: Sequence[str], bars: bool) -> Text:
    """``kernel ran ▕███▉▏ 97%  SMs busy ▕███▎▏ 82%  …`` (``bars``; a figure not available reads
    ``SMs busy –``), else ``kernel 97% SM 82% …``."""
    parts = []
    for value, label, colour in zip(values, labels, colours, strict=True):
        if bars and value is not None:
            parts.append(Text.assemble(f"{label} ", _bar(value, GAUGE_CELLS, colour), _pct(value)))
        else:
            parts.append(Text(f"{label} {_pct(value).strip():>3}" if value is not None else f"{label} {DASH}"))
    return Text("  " if bars else " ").join(parts)


def gpm_entry(r: GpuReading, workload: bool, compact: bool, form: int = 0) -> Text:
    """One GPU with GPM's gauges first. ``form`` 0: ``▶ GPU 0  kernel ran ▕███▉▏ 97%  SMs busy ▕███▎▏ 82%
    tensor … · 3.0/80 GiB · 250 W · 1980 MHz · 61°C``; 1: the figures after the gauges shorter
    (``3.0/80G 250W 1980MHz 61°C``); 2: the gauges' labels short, without bars (``kernel 97% SM 82% …``).
    ``compact`` (GPUs sharing lines): ``▶0 kernel 97% SM 82% tensor 76% DRAM 31% 3.0/80G 250W``."""
    mark = Text("▶" if workload else " ", style="bold cyan")
    style = "bold" if workload else ""
    name = f"{r.index}" if compact else f" GPU {r.index:<2}"
    values = [r.gpu_util_pct, *(getattr(r, key) for key in GAUGE_KEYS)]
    bars = form < 2 and not compact
    labels = ["kernel ran", *(g[1] for g in GPM_GAUGES)] if bars else ["kernel", *(g[2] for g in GPM_GAUGES)]
    gauges = _gauges(values, labels, ["green", *(g[3] for g in GPM_GAUGES)], bars)
    memory, power = _memory(r, True).strip(), _num(r.power_w, ".0f", 0, "W")
    clock, temp = _num(r.sm_clock_mhz, ".0f", 0, "MHz"), _num(r.temp_c, ".0f", 0, "°C")
    if compact:
        tail = f" {memory} {power}"
    elif form == 0:
        spaced = [memory.replace("G", " GiB") if memory != NA else NA, power.replace("W", " W")]
        tail = " · " + " · ".join([*spaced, clock.replace("MHz", " MHz"), temp])
    else:
        tail = f" · {memory} {power} {clock} {temp}"
    return Text.assemble(mark, (name, style), " ", gauges, (tail, style))


def mig_entry(m: MigReading, compact: bool, bars: bool) -> Text:
    """One MIG instance's GPM figures, under its GPU: ``  └ GPU 0 · GI 1  SMs busy ▕██▌ ▏ 45% …``."""
    labels = [g[1] if bars and not compact else g[2] for g in GPM_GAUGES]
    values = [m.sm_active_pct, m.tensor_active_pct, m.dram_active_pct]
    gauges = _gauges(values, labels, [g[3] for g in GPM_GAUGES], bars and not compact)
    return Text.assemble(("  └ " if not compact else "└", "dim"), (m.label, "bold"), "  ", gauges)


def gpu_entry(r: GpuReading, workload: bool, compact: bool = False, gpm: bool = False, form: int = 0) -> Text:
    """One GPU: ``▶ GPU 0 ▕█████▌  ▏  70% · mem   3.0/80 GiB ·  250 W · 1980 MHz ·  61°C``; compact:
    ``▶0  70% 3.0/80G 250W 1980MHz 61°C``; ``GPU 2 n/a`` when NVML answered nothing for it; ``gpm``:
    with GPM's gauges, in ``form`` (``gpm_entry``)."""
    mark = Text("▶" if workload else " ", style="bold cyan")
    name = f"{r.index}" if compact else f" GPU {r.index:<2}"
    style = "bold" if workload else ""
    if not r.answered:
        why = " n/a" if compact else f" {NA}: NVML gives no reading for this GPU"
        return Text.assemble(mark, (name, style), (why, "yellow"))
    if gpm:
        return gpm_entry(r, workload, compact, form)
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


def gpu_rows(
    readings: Sequence[GpuReading],
    workload: Collection[int],
    max_lines: int,
    *,
    gpm: bool = False,
    mig: Sequence[MigReading] = (),
    width: int = 0,
) -> Text:
    """The rows' text: a line per GPU (then per MIG instance), or (more than ``max_lines``) several
    per line, compact; ``gpm``: with GPM's gauges, drawn as bars where ``width`` (0: any) has room."""
    count = len(readings) + len(mig)
    per_line = max(1, math.ceil(count / max(1, max_lines)))
    compact = per_line > 1
    if compact and not any(getattr(x, key) is not None for x in (*readings, *mig) for key in GAUGE_KEYS):
        gpm = False  # sharing lines, "–" gauges would crowd out the rest: the reason was said once
    form = 0  # GPM's: the widest that fits
    while gpm and width and not compact and form < GPM_FORMS - 1:
        if max((gpu_entry(r, True, gpm=True, form=form).cell_len for r in readings), default=0) <= width:
            break
        form += 1
    entries = [gpu_entry(r, r.index in workload, compact=compact, gpm=gpm, form=form) for r in readings]
    entries += [mig_entry(m, compact, bars=form < 2) for m in mig]
    widest = max((e.cell_len for e in entries), default=0)
    for e in entries:
        e.pad_right(widest - e.cell_len)  # aligned, also when they share a line
    lines = [Text("  ").join(entries[start : start + per_line]) for start in range(0, len(entries), per_line)]
    out = Text("\n").join(lines)
    out.no_wrap, out.overflow = True, "ellipsis"
    return out


def gpm_flowing(gpu: GpuSample | None) -> bool:
    """Some GPM figure in the sample: the workload's GPU's, a watched GPU's or a MIG instance's."""
    if gpu is None:
        return False
    figures = [getattr(gpu, key) for key in GAUGE_KEYS]
    figures += [getattr(r, key) for r in gpu.per_gpu for key in GAUGE_KEYS]
    figures += [getattr(m, key) for m in gpu.mig for key in GAUGE_KEYS]
    return any(v is not None for v in figures)


def readings_of(gpu: GpuSample | None, info: GpuInfo | None) -> tuple[GpuReading, ...]:
    """The rows' GPUs: the sample's per-GPU readings; without any, the workload's GPU from the
    sample's own figures where they hold GPM's (a sampler that reads one GPU)."""
    if gpu is None:
        return ()
    if gpu.per_gpu or not gpm_flowing(gpu) or info is None or info.index is None:
        return gpu.per_gpu
    own = {key: getattr(gpu, key) for key in ("gpu_util_pct", "mem_used_mib", "mem_total_mib", "power_w")}
    extra = {key: getattr(gpu, key) for key in ("sm_clock_mhz", "temp_c", *GAUGE_KEYS)}
    return (GpuReading(info.index, **own, **extra),)


def worth_showing(gpu: GpuSample | None, workload: Collection[int], info: GpuInfo | None = None) -> bool:
    """More than the workload's own GPU to show (that one's figures are in the header), or GPM's
    gauges (also of one GPU) or a MIG instance."""
    readings = readings_of(gpu, info)
    if gpu is not None and readings and (gpm_flowing(gpu) or gpu.mig):
        return True
    return len(readings) > 1 or any(r.index not in workload for r in readings)


class GpuRows(Static):
    """The per-GPU rows, above the charts; hidden while there is nothing beyond the header's GPU."""

    DEFAULT_CSS = """
    GpuRows { height: auto; padding: 0 1; text-wrap: nowrap; text-overflow: ellipsis; }
    """

    lines = 0  # the lines shown (0: hidden); the app's layout gives the charts what is left

    def show(
        self, gpu: GpuSample | None, info: GpuInfo | None, *, height: int, stale: bool = False, ranks: int = 1
    ) -> bool:
        """``gpu``: the newest NVML sample; ``height``: the terminal's rows; ``stale``: NVML has
        stopped answering (the old figures are hidden); ``ranks``: a data-parallel run's ranks.
        True when the rows took lines or gave them back (the charts' layout must follow)."""
        before = self.lines
        readings = readings_of(gpu, info)
        workload = workload_gpus(info, readings, ranks)
        shown = not stale and gpu is not None and worth_showing(gpu, workload, info)
        self.display = shown
        if not shown or gpu is None:
            self.lines = 0
            return self.lines != before
        gpm = gpm_flowing(gpu) or (info is not None and info.gpm_unavailable is not None)
        self.tooltip = GPM_EXPLAINED if gpm else None
        width = max(0, self.app.size.width - 2)  # less the padding; the app's: a hidden widget has no size
        lines = TALL_LINES if height >= TALL else SHORT_LINES
        text = gpu_rows(readings, workload, lines, gpm=gpm, mig=gpu.mig, width=width)
        self.lines = len(text.plain.split("\n"))
        self.update(text)
        return self.lines != before
