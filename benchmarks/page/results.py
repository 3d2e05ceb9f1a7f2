"""The cases' published results read for the page (``NAME.result.json`` beside each output in
``docs/bench/``): a run as it printed, its header, its named figures, its tables' cells and the goals
judged against its intervals. Nothing here reads an output's text: every figure is the result's."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from benchmarks.harness.render import markdown
from benchmarks.harness.result import SUFFIX, Result, load
from benchmarks.harness.stamp import stamp_line
from benchmarks.page.sweeps import DOCS

BENCH = DOCS / "bench"
# the engine-overhead runs (the engine_overhead case with --hand and its kin), as they printed
OVERHEAD = BENCH / "h100-vision-overhead"


@cache
def result(folder: Path, file: str) -> Result:
    """The result of the output ``file`` (``NAME.txt``, ``NAME.md`` or ``NAME``) in ``folder``."""
    return load(folder / f"{Path(file).stem}{SUFFIX}")


def overhead(file: str, folder: Path = OVERHEAD) -> str:
    """A run as it printed: its header lines as text, its tables as tables; what it printed on
    stderr (torch's warnings) left out."""
    return markdown(result(folder, file), page=True).strip()


def as_printed(file: str, folder: Path) -> str:
    """An output exactly as it printed (its ``#`` lines and all)."""
    return markdown(result(folder, file)).strip()


def run_header(file: str, folder: Path = OVERHEAD) -> str:
    """A run's device and torch/date lines in one line (a harness run's: its first header line and its stamp)."""
    r = result(folder, file)
    lines = r.comments()[:2] if r.source is not None else [*r.comments()[:1], stamp_line(r.stamp)]
    return "; ".join(lines)


def paired_line(file: str, label: str, folder: Path = OVERHEAD, how: str = "paired rounds") -> str:
    """A run's figure ``LABEL, HOW`` as it printed it."""
    return result(folder, file).figure(f"{label}, {how}").text


def summary_lines(file: str, folder: Path = OVERHEAD) -> str:
    """A run's closing lines (its text, not its tables or header), one bullet each."""
    return "\n".join(f"- {line}" for line in result(folder, file).text_lines())


def paired_goal(file: str, label: str, goal: float, folder: Path = OVERHEAD, how: str = "paired rounds") -> str:
    """The goal "at least ``goal``x" against a run's paired interval: met when its low end clears it."""
    f = result(folder, file).figure(f"{label}, {how}")
    assert f.low is not None and f.high is not None, f"{file}: no interval for {label!r}"
    low, high = f.low, f.high
    if f.met == "not met":
        low = min(low, goal - 1e-9)  # its low end lies below the goal, however the printed figure rounds
    if low >= goal:
        verdict = "**met** (the whole interval clears it)"
    elif high < goal:
        verdict = "**not met** (the whole interval lies below it)"
    else:
        verdict = "**not met**: not shown, the interval's low end lies below it (not decided)"
    return f"The goal of at least {goal}× against the paired interval ({label}, {how}): {verdict}."


def rounds_range(file: str, folder: Path = OVERHEAD) -> str:
    """The lowest and highest bare steps/s of a run's rounds."""
    bare = [float(cell) for cell in result(folder, file).table("round").column("bare steps/s")]
    return f"{min(bare):.0f} and {max(bare):.0f}"


def call_cost(label: str) -> str:
    """One call's row of ``host-call-cost``: its ratio, verdict and µs a step, as printed."""
    cells = result(OVERHEAD, "host-call-cost").table("call between two steps").row(label)
    if cells[0] != label:
        raise KeyError(f"host-call-cost: no row {label!r}")
    return f"{cells[2]}, {cells[3]} ({cells[4]} µs a step)"
