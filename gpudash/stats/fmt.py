"""Estimates and comparisons as every screen and report prints them: "48.2 ± 1.3",
"1.08× [0.98–1.19]", "+8% (−2 … +19%)"."""

from __future__ import annotations

import math

from gpudash.core.textfmt import fmt_num, plain_pm
from gpudash.stats.comparison import Comparison, Estimate

MINUS = "\u2212"  # a typographic minus: "−2", as the intervals print it


def fmt_pm(e: Estimate | None) -> str:
    """ "48.2 ± 1.3": the half-width to 2 significant digits, the mean to the same decimals (``plain_pm``'s
    column)."""
    if e is None:
        return "–"
    if e.half_width is None or not math.isfinite(e.half_width) or not math.isfinite(e.mean):
        return f"{fmt_num(e.mean)} (no CI)"  # none, or none that a number can say (values near 1e308)
    return plain_pm(e.mean, e.half_width, column=True)


def _signed(v: float, decimals: int) -> str:
    text = f"{v:+.{decimals}f}"
    return MINUS + text[1:] if text.startswith("-") else text


def fmt_ratio(c: Comparison) -> str:
    """A ratio and its interval, one way everywhere: "1.08× [0.98–1.19]"; "1.08× (no CI)" without
    one. The interval of a ratio is asymmetric (it is taken on the log), so never "± half-width"; a
    third decimal when the interval is narrower than 0.01, so its ends never print the same."""
    if not c.finite:
        return "–"
    if c.low is None or c.high is None:
        return f"{c.ratio:.2f}× (no CI)"
    digits = 3 if c.high - c.low < 0.01 else 2
    return f"{c.ratio:.{digits}f}× [{c.low:.{digits}f}–{c.high:.{digits}f}]"


def fmt_change(c: Comparison) -> str:
    """The same as a change in percent: "+8% (−2 … +19%)"; "+8% (no CI)" without an interval.
    One decimal where the interval is under 10 points wide and its ends under 100%."""
    change, interval = change_parts(c)
    return f"{change} ({interval})" if change != "–" else change


def change_parts(c: Comparison) -> tuple[str, str]:
    """``fmt_change``'s two halves, ("+8%", "−2 … +19%"), for a cell of two lines."""
    if not c.finite:
        return "–", ""
    change = (c.ratio - 1.0) * 100.0
    if c.low is None or c.high is None:
        return f"{_signed(change, 0 if abs(change) >= 10 else 1)}%", "no CI"
    low, high = (c.low - 1.0) * 100.0, (c.high - 1.0) * 100.0
    d = 1 if high - low < 10 and max(abs(low), abs(high)) < 100 else 0
    return f"{_signed(change, d)}%", f"{_signed(low, d)} … {_signed(high, d)}%"
