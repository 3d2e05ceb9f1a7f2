"""Comparisons as gpudash prints them, read back (``tests.printed``): a ratio with its interval and
verdict (a report's cell, a sweep's line, ``report a.csv b.csv``'s pairs), the dashboard's change in
percent, Markdown tables' cells and a sweep's or tune's account of its time."""

from __future__ import annotations

import re
from dataclasses import dataclass

from tests.printed.figures import FIGURE, NOISY_MARK, NUMBER, Figure, figure, number

VERDICTS = ("faster", "slower", "within noise", "no change detected", "too short")


# -- ratios and verdicts ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Compared:
    """``1.07× [1.05–1.09] faster`` (a report's cell), ``1.08× (no CI)``, a sweep's ``1.00×`` of
    its baseline; its verdict when the text has one, and whether it was marked noisy."""

    ratio: float
    low: float | None  # the ratio's 95% interval (None: none)
    high: float | None
    verdict: str = ""  # one of VERDICTS; "" when the text has none
    metric: str = ""  # "samples/s" when the comparison is of samples/s (a batch size changed)
    noisy: bool = False  # marked "⚠ noisy": measured while the machine was noisy
    rest: str = ""  # what follows the verdict ("use --seconds ≥ 4", "(the base's)"…)

    @property
    def has_interval(self) -> bool:
        return self.low is not None and self.high is not None


_RATIO = re.compile(
    rf"(?:(?P<metric>\S+/s) )?(?P<ratio>{NUMBER})×(?: \[(?P<low>{NUMBER})–(?P<high>{NUMBER})\]| \(no CI\))?"
)


def without_noisy_mark(text: str) -> tuple[str, bool]:
    """``text`` without gpudash's noisy mark (`` ⚠ noisy`` or `` (⚠ noisy)`` at its end), and whether it had one."""
    text = text.strip()
    for mark in (f" ({NOISY_MARK})", f" {NOISY_MARK}"):
        if text.endswith(mark):
            return text.removesuffix(mark), True
    return text, text == NOISY_MARK


def verdict(text: str) -> tuple[str, str, bool]:
    """A verdict cell: (the verdict, what follows it, marked noisy); ("", text, …) when it has none."""
    text, noisy = without_noisy_mark(text)
    for v in VERDICTS:
        if text == v or text.startswith(v + " ") or text.startswith(v + ":"):
            return v, text.removeprefix(v).strip(" :"), noisy
    return "", text, noisy


def compared(text: str) -> Compared | None:
    """A ratio, its interval and verdict (a report's cell, or a ratio cell alone); None: not one."""
    text, noisy = without_noisy_mark(text)
    m = _RATIO.match(text)
    if m is None:
        return None
    said, rest, marked = verdict(text[m.end() :].removeprefix(","))
    return Compared(
        ratio=number(m["ratio"]),
        low=None if m["low"] is None else number(m["low"]),
        high=None if m["high"] is None else number(m["high"]),
        verdict=said,
        metric=m["metric"] or "",
        noisy=noisy or marked,
        rest=rest,
    )


@dataclass(frozen=True)
class Change:
    """The dashboard's change in percent: ``+8% (−2 … +19%)``; ``+8% (no CI)`` without an interval."""

    pct: float
    low: float | None
    high: float | None


_CHANGE = re.compile(rf"(?P<pct>{NUMBER})% \((?:(?P<low>{NUMBER}) … (?P<high>{NUMBER})%|no CI)\)")


def change(text: str) -> Change | None:
    m = _CHANGE.fullmatch(text.strip())
    if m is None:
        return None
    low, high = (None if m[k] is None else number(m[k]) for k in ("low", "high"))
    return Change(number(m["pct"]), low, high)


@dataclass(frozen=True)
class Versus:
    """``report a.csv b.csv``'s line per pair: ``encdec/pipelined bs8 (b.csv): 1.09× [1.07–1.11]
    encdec/serial bs8 (a.csv), faster`` (`` (⚠ noisy)`` after it when either side was)."""

    name: str
    run: str
    compared: Compared
    base: str
    base_run: str


_PAIR = re.compile(
    rf"^(?:gpudash: )?(?P<name>.+?) \((?P<run>[^()]+)\): (?P<ratio>{NUMBER}×(?: \[[^\]]*\]| \(no CI\))?) "
    r"(?P<base>.+?) \((?P<base_run>[^()]+)\), (?P<verdict>.+)$"
)


def versus(line: str) -> Versus | None:
    m = _PAIR.match(line.strip())
    if m is None or (seen := compared(f"{m['ratio']} {m['verdict']}")) is None:
        return None
    return Versus(m["name"], m["run"], seen, m["base"], m["base_run"])


def versus_lines(text: str) -> list[Versus]:
    return [v for line in text.splitlines() if (v := versus(line)) is not None]


# -- a sweep's and tune's lines per measurement ------------------------------------------------------
@dataclass(frozen=True)
class SweepLine:
    """``sync_loss/fixed bs4: 74.9 ± 0.1 steps/s, 1.50× [1.49–1.51] of sync-heavy: faster (⚠ noisy: …)``
    (a configuration), ``… repeat 2: 74.9 ± 0.1 steps/s (1.5 s, 12 samples)`` (a repeat),
    ``fixed b32 · knobs: 1520 ± 12 samples/s (1.0 s)`` (tune), or ``NAME: failed: …``."""

    name: str
    figure: Figure | None  # None: failed, or no samples
    unit: str  # "steps/s", "samples/s"
    compared: Compared | None = None  # against the base, with its verdict
    base: str = ""
    seconds: float | None = None
    samples: int | None = None
    noisy: str = ""
    failed: str = ""
    rest: str = ""  # anything else said after the figure ("(baseline)"…)


_SWEEP = re.compile(rf"^(?:gpudash: )?(?P<name>.+?): (?P<figure>{FIGURE}) (?P<unit>\S+/s)(?P<rest>.*)$")
_OF_BASE = re.compile(r"^, (?P<ratio>.+?) of (?P<base>.+?): (?P<verdict>.+?)(?= \(⚠ |$)")
_TIMED = re.compile(r"^ \((?P<s>[\d.]+) s(?:, (?P<n>\d+) samples)?\)")


def sweep_line(line: str) -> SweepLine | None:
    text = line.strip().removeprefix("gpudash: ")
    failed = re.match(r"^(?P<name>.+?): (?P<why>failed: .*|no samples)$", text)
    if failed is not None:
        return SweepLine(failed["name"], None, "", failed=failed["why"])
    m = _SWEEP.match(text)
    if m is None:
        return None
    rest, noisy = m["rest"], ""
    if (at := rest.find(" (⚠ ")) >= 0 and rest.endswith(")"):
        rest, noisy = rest[:at], rest[at + 4 : -1]
    versus, timed = _OF_BASE.match(rest), _TIMED.match(rest)
    seen: Compared | None = None
    if versus is not None:
        seen = compared(f"{versus['ratio']} {versus['verdict']}")
        rest = rest[versus.end() :]
    elif timed is not None:
        rest = rest[timed.end() :]
    return SweepLine(
        name=m["name"],
        figure=figure(m["figure"]),
        unit=m["unit"],
        compared=seen,
        base=versus["base"] if versus is not None else "",
        seconds=float(timed["s"]) if timed is not None else None,
        samples=int(timed["n"]) if timed is not None and timed["n"] else None,
        noisy=noisy,
        rest=rest.strip(),
    )


# -- Markdown tables --------------------------------------------------------------------------------------
def table_rows(md: str, heading: str | None = None) -> list[list[str]]:
    """The cells of the Markdown table under ``heading`` (the first table of ``md`` when None),
    header and rule left out; ``\\|`` in a cell stays a ``|``."""
    section = md if heading is None else md.split(heading, 1)[1].split("\n## ", 1)[0]
    lines: list[str] = []
    for line in section.splitlines():
        if line.startswith("|"):
            lines.append(line)
        elif lines:
            break  # the table ended
    return [cells(line) for line in lines[2:]]


def cells(line: str) -> list[str]:
    """The cells of one Markdown table row, stripped; ``\\|`` in a cell stays a ``|``."""
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line.strip()[1:-1])]


# -- a sweep's or tune's account of its time ------------------------------------------------------------
_SPENT = re.compile(rf"^- (?P<label>.+?): (?P<s>{NUMBER}) s \((?P<pct>\d+)%\)$")


def time_account(md: str) -> dict[str, float]:
    """The seconds each part took, as "## Where the time went" lists them (``- measuring: 12.3 s (45%)``)."""
    section = md.split("## Where the time went", 1)[1].split("\n## ", 1)[0]
    return {m["label"]: number(m["s"]) for line in section.splitlines() if (m := _SPENT.match(line)) is not None}
