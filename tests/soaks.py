"""What the two soaks share with their tests, torch-free: a process's RSS, descriptors and threads
read from ``/proc``, and the verdicts on whether they grew.

``python -m benchmarks run soak`` (the dashboard through Textual's pilot over the real engine: the base
configuration's spread, and like for like) and ``python -m benchmarks run soak_dashboard`` (the dashboard in
tmux: the first window after the warm-up against the last) import it from here;
``tests/test_soak_verdicts.py`` and ``tests/test_dashboard_memory_soak.py`` check the verdicts.
It lives in tests/ because nothing in tests/ imports from benchmarks/, and it is no part of gpudash.
"""

from __future__ import annotations

import argparse
import os
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gpudash.core.procgroup import members

FLAT_PCT = 5.0


def default_warmup_minutes(minutes: float) -> float:
    """Left out of the verdicts: 5 minutes, or a sixth of a run shorter than 30 (the dashboard
    soak's windows too)."""
    return min(5.0, minutes / 6)


def add_measure_options(p: argparse.ArgumentParser) -> None:
    """Both soaks' --measure-every and --warmup-minutes (None when not given: each soak fills in its default)."""
    p.add_argument(
        "--measure-every",
        type=float,
        metavar="S",
        help="seconds between measurements (default: --change-every, just before each change)",
    )
    p.add_argument(
        "--warmup-minutes",
        type=float,
        help="left out of the verdicts (default: 5, or a sixth of a run shorter than 30 minutes)",
    )


# -- processes, from /proc ----------------------------------------------------------------------------
def _status(pid: int) -> dict[str, str]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        out[key] = value.strip()
    return out


@dataclass(frozen=True)
class ProcStats:
    """One process, or a tree of them summed."""

    rss_mib: float
    fds: int
    threads: int
    processes: int = 1

    def __add__(self, other: ProcStats) -> ProcStats:
        return ProcStats(
            self.rss_mib + other.rss_mib,
            self.fds + other.fds,
            self.threads + other.threads,
            self.processes + other.processes,
        )


def proc_stats(pid: int) -> ProcStats | None:
    """RSS, open fds and threads of ``pid``; None when it is gone."""
    try:
        status = _status(pid)
        fds = len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None
    rss_kib = float(status.get("VmRSS", "0 kB").split()[0])
    return ProcStats(rss_kib / 1024, fds, int(status.get("Threads", "0")))


def tree_stats(pid: int) -> ProcStats | None:
    """The workload process and its group (it leads one: its loader workers, its ranks), summed."""
    total = proc_stats(pid)
    if total is None:
        return None
    for kid in members(pid):
        stats = proc_stats(kid) if kid != pid else None
        if stats is not None:
            total = total + stats
    return total


# -- the soak case: the base configuration's spread after the warm-up ------------------------------
COLUMNS: tuple[tuple[str, str, str], ...] = (  # key, heading, format
    ("parent_rss", "parent RSS MiB", "{:.1f}"),
    ("workload_rss", "workload RSS MiB", "{:.1f}"),
    ("parent_fds", "parent fds", "{:.0f}"),
    ("workload_fds", "workload fds", "{:.0f}"),
    ("parent_threads", "parent threads", "{:.0f}"),
    ("workload_threads", "workload threads", "{:.0f}"),
    ("gpu_mem", "GPU mem MiB", "{:.0f}"),  # NVML, the whole device
    ("cuda_allocated", "torch allocated MiB", "{:.0f}"),  # the workload's caching allocator
    ("cuda_reserved", "torch reserved MiB", "{:.0f}"),
    ("gpu_outside", "outside the allocator MiB", "{:.0f}"),  # NVML − reserved: context, kernels, libraries
)

# The allocator's cache (reserved − allocated) of a configuration depends on what ran before it:
# the model's persistent tensors sit wherever the previous configuration left room for them, and a
# segment holding one cannot be given back. So these columns are also judged like for like: each
# measurement of the base against the earlier ones that followed the same configuration.
HISTORY_DEPENDENT = frozenset({"gpu_mem", "cuda_reserved"})


COUNTS = frozenset({"parent_fds", "workload_fds", "parent_threads", "workload_threads"})  # whole numbers


@dataclass
class Row:
    minute: float
    values: dict[str, float | None]
    processes: int  # in the workload's tree
    running: str  # what ran: "encdec serial b8 (channels_last=on)"
    steps: int
    before: str = ""  # what ran before the last change ("" before the first)


@dataclass
class Soak:
    """The measurements and what happened between them."""

    rows: list[Row] = field(default_factory=list)
    changes: list[str] = field(default_factory=list)
    trouble: list[str] = field(default_factory=list)  # crashes, errors, restarts
    base: str = ""  # the base configuration's label


def _spread_pct(values: list[float]) -> float:
    """(max − min) relative to the first value, in %."""
    spread = max(values) - min(values)
    return 100.0 * spread / values[0] if values[0] else (0.0 if spread == 0 else float("inf"))


def _base_after_warmup(rows: list[Row], warmup_min: float, base: str) -> list[tuple[str, Row]]:
    """The base configuration's measurements after the warm-up, each with what ran before the
    change that led to it ("" when none did)."""
    return [(r.before, r) for r in rows if r.minute >= warmup_min - 1e-9 and r.running == base]


def verdict(rows: list[Row], key: str, warmup_min: float, base: str) -> str:
    """ "flat within 5% after the first 5 minutes" for one column (the base configuration's
    values after the warm-up), or how it moved."""
    measured = [r.values[key] for _, r in _base_after_warmup(rows, warmup_min, base)]
    after = [v for v in measured if v is not None]
    if len(after) < 2:
        return "n/a (fewer than 2 measurements of the base configuration after the warm-up)"
    ref = after[0]
    spread = max(after) - min(after)
    pct = _spread_pct(after)
    drift = after[-1] - ref
    span = f"after the first {warmup_min:g} minutes ({len(after)} measurements"
    if pct <= FLAT_PCT:
        return f"flat within {FLAT_PCT:g}% {span}, spread {pct:.1f}%)"
    if key in COUNTS and spread <= 1:  # one thread or fd coming and going is not growth
        return f"flat within ±1 {span}, {min(after):.0f}–{max(after):.0f})"
    return f"NOT flat: spread {pct:.1f}% {span}; {ref:.1f} → {after[-1]:.1f}, {'+' if drift >= 0 else ''}{drift:.1f})"


def like_for_like_verdict(rows: list[Row], key: str, warmup_min: float, base: str) -> str:
    """Growth without the history: the base's values after the warm-up grouped by the
    configuration that ran just before each, every group judged as ``verdict`` judges the whole."""
    groups: dict[str, list[float]] = {}
    for before, r in _base_after_warmup(rows, warmup_min, base):
        value = r.values[key]
        if value is not None:
            groups.setdefault(before, []).append(value)
    judged = {before: values for before, values in groups.items() if len(values) >= 2}
    if not judged:
        return "like for like: n/a (no configuration came before the base twice after the warm-up)"
    worst, values = max(judged.items(), key=lambda item: _spread_pct(item[1]))
    pct = _spread_pct(values)
    counted = sum(len(v) for v in judged.values())
    plural = "s" if len(judged) > 1 else ""
    what = (
        f"{len(judged)} configuration{plural} before it, {counted} measurements; the largest spread "
        f"{pct:.1f}%, after {worst or 'the start'}: {', '.join(f'{v:.0f}' for v in values)}"
    )
    flat = "flat within" if pct <= FLAT_PCT else "NOT flat beyond"
    return f"like for like (after the same configuration) {flat} {FLAT_PCT:g}% ({what})"


def table(soak: Soak, warmup_min: float, base: str) -> str:
    head = ["minute", *(h for _, h, _ in COLUMNS), "workload procs", "steps", "running"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in soak.rows:
        cells = [f"{r.minute:.1f}"]
        for key, _, fmt in COLUMNS:
            v = r.values[key]
            cells.append(fmt.format(v) if v is not None else "n/a")
        cells += [str(r.processes), str(r.steps), r.running]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", f"| column | verdict (base: {base}) |", "|---|---|"]
    for key, heading, _ in COLUMNS:
        if soak.rows and all(r.values[key] is None for r in soak.rows):
            lines.append(f"| {heading} | not measured here (no GPU, or no sample of it) |")
            continue
        text = verdict(soak.rows, key, warmup_min, base)
        if key in HISTORY_DEPENDENT:
            text += "; " + like_for_like_verdict(soak.rows, key, warmup_min, base)
        lines.append(f"| {heading} | {text} |")
    return "\n".join(lines)


# -- the soak_dashboard case: the first window after the warm-up against the last -------------------
DASHBOARD_COUNTS = frozenset({"fds", "threads"})  # the dashboard soak's whole-number columns


@dataclass
class DashboardRow:
    minute: float
    values: dict[str, float | None]
    changes: int
    header: str  # the screen's first line: what runs, the status, REC


def windows(
    rows: Sequence[DashboardRow], key: str, warmup_min: float, window_min: float
) -> tuple[list[float], list[float]]:
    """The values of the first and of the last window after the warm-up (empty: too few)."""
    after = [(r.minute, r.values[key]) for r in rows if r.minute >= warmup_min - 1e-9 and r.values[key] is not None]
    if len(after) < 2:
        return [], []
    end = after[-1][0]
    first = [v for m, v in after if m <= after[0][0] + window_min + 1e-9]
    last = [v for m, v in after if m >= end - window_min - 1e-9]
    return first, last  # type: ignore[return-value]


def _count(n: int) -> str:
    return f"{n} measurement{'s' if n != 1 else ''}"


def window_verdict(rows: Sequence[DashboardRow], key: str, warmup_min: float, window_min: float) -> str:
    """ "flat within 5% (first window … → last window …)" or how it moved, for one column."""
    first, last = windows(rows, key, warmup_min, window_min)
    if not first:
        return "n/a (fewer than 2 measurements after the warm-up)"
    a, b = statistics.median(first), statistics.median(last)
    pct = 100.0 * (b - a) / a if a else (0.0 if a == b else float("inf"))
    fmt = "{:.0f}" if key in DASHBOARD_COUNTS else "{:.1f}"
    what = (
        f"median of the first {window_min:.3g} min after the warm-up {fmt.format(a)} "
        f"({_count(len(first))}), of the last {window_min:.3g} min {fmt.format(b)} ({_count(len(last))}): "
        f"{pct:+.1f}%"
    )
    if abs(pct) <= FLAT_PCT:
        return f"flat within {FLAT_PCT:g}%: {what}"
    if key in DASHBOARD_COUNTS and abs(b - a) <= 1:
        return f"flat within ±1: {what}"
    return f"NOT flat: {what}"


def slope_per_hour(rows: Sequence[DashboardRow], key: str, warmup_min: float) -> float | None:
    """The least-squares slope after the warm-up, per hour (a second look at slow growth)."""
    pts = [(r.minute, r.values[key]) for r in rows if r.minute >= warmup_min - 1e-9 and r.values[key] is not None]
    if len(pts) < 3:
        return None
    xs, ys = [p[0] for p in pts], [float(p[1]) for p in pts]  # type: ignore[arg-type]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return 60.0 * sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=False)) / den if den else None
