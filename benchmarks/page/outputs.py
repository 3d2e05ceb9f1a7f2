"""The committed outputs of the benchmark scripts (``engine_overhead.py``, ``host_call_cost.py``,
``track_overhead.py``, ...) read for the page: tables, header lines, paired lines and goals, as
the scripts printed them."""

from __future__ import annotations

import re
from pathlib import Path

from benchmarks.page.sweeps import DOCS

# the engine-overhead runs (benchmarks/engine_overhead.py --hand and its kin) as they printed
OVERHEAD = DOCS / "bench" / "h100-vision-overhead"


def overhead(file: str, folder: Path = OVERHEAD) -> str:
    """An engine_overhead.py (or track_overhead.py) run as it printed: its header lines as text, its
    table as a table; torch's warnings on stderr (the sync debug mode's) left out."""
    lines = (folder / file).read_text().strip().splitlines()
    lines = [line for line in lines if "UserWarning" not in line and not line.startswith("  torch._C")]
    return "\n".join(line.lstrip("# ") if line.startswith("#") else line for line in lines)


def run_header(file: str, folder: Path = OVERHEAD) -> str:
    """A benchmark output's device and torch/date lines, as printed, in one line."""
    lines = [line.lstrip("# ") for line in (folder / file).read_text().splitlines() if line.startswith("# ")]
    return "; ".join(lines[:2])


def paired_line(file: str, label: str, folder: Path = OVERHEAD, how: str = "paired rounds") -> str:
    """A benchmark's paired line (``label, paired rounds: ...``, or another ``how``), as printed."""
    found = re.search(rf"^{re.escape(label)}, {re.escape(how)}: (.+)$", (folder / file).read_text(), re.M)
    assert found, f"{file}: no line {label!r}, {how!r}"
    return f"{label}, {how}: {found.group(1)}"


def summary_lines(file: str, folder: Path = OVERHEAD) -> str:
    """A benchmark's closing lines (after its table), as printed, one bullet each."""
    lines = [line for line in (folder / file).read_text().splitlines() if line.strip()]
    out = [line for line in lines if not line.startswith(("|", "#", " ", "/")) and "Warning" not in line]
    return "\n".join(f"- {line}" for line in out)


def paired_goal(file: str, label: str, goal: float, folder: Path = OVERHEAD, how: str = "paired rounds") -> str:
    """The goal "at least ``goal``x" against a run's paired interval: met when its low end clears it."""
    line = paired_line(file, label, folder, how)
    found = re.search(r"\[([0-9.]+)–([0-9.]+)\]", line)
    assert found, f"{file}: no interval in {line!r}"
    low, high = float(found.group(1)), float(found.group(2))
    printed = re.search(r"\(target >= [0-9.]+: (met|not met)\)", line)  # the script's verdict, unrounded
    if printed is not None and printed.group(1) == "not met":
        low = min(low, goal - 1e-9)  # its low end lies below the goal, however the printed figure rounds
    if low >= goal:
        verdict = "**met** (the whole interval clears it)"
    elif high < goal:
        verdict = "**not met** (the whole interval lies below it)"
    else:
        verdict = "**not met**: not shown, the interval's low end lies below it (not decided)"
    return f"The goal of at least {goal}× against the paired interval ({label}, {how}): {verdict}."


def rounds_range(file: str, folder: Path = OVERHEAD) -> str:
    """The lowest and highest bare steps/s of a run's rounds (its table's second column)."""
    bare = [
        float(line.split("|")[2]) for line in (folder / file).read_text().splitlines() if re.match(r"\| \d+ \|", line)
    ]
    return f"{min(bare):.0f} and {max(bare):.0f}"


def call_cost(label: str) -> str:
    """One row of ``host-call-cost.txt``: its ratio, verdict and µs a step, as printed."""
    for line in (OVERHEAD / "host-call-cost.txt").read_text().splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[0] == label:
            return f"{cells[2]}, {cells[3]} ({cells[4]} µs a step)"
    raise AssertionError(f"host-call-cost.txt: no row {label!r}")
