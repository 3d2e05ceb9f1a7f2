"""Every interval and verdict a case prints, through one path: gpudash's own statistics
(``gpudash.stats.comparison``: ``compare_paired`` for arms measured in pairs, ``compare`` over
batch means otherwise), its verdicts with its noise threshold (a significant change under 2% is
*within noise*, an interval that holds 1 *no change detected*) and its ratio format
(``gpudash.stats.fmt``). A goal (``Target``) is judged against the interval, never the mean alone."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from benchmarks.harness.result import Figure
from gpudash.stats.comparison import Comparison, Estimate, Verdict, compare, compare_paired, estimate_from_batches
from gpudash.stats.fmt import fmt_pm, fmt_ratio


@dataclass(frozen=True)
class Target:
    """A goal for a ratio: at least ``bound`` (``at_least``) or at most it."""

    bound: float
    at_least: bool = True

    @property
    def text(self) -> str:
        return f"{'≥' if self.at_least else '≤'} {self.bound:g}"

    def judge(self, low: float | None, high: float | None) -> str:
        """ "met" when the whole interval meets the goal, "not met" when it wholly misses it,
        "not shown" when it spans the goal, "no interval" without one."""
        if low is None or high is None:
            return "no interval"
        near, far = (low, high) if self.at_least else (-high, -low)
        bound = self.bound if self.at_least else -self.bound
        if near >= bound:
            return "met"
        if far < bound:
            return "not met"
        return "not shown"


def comparison_figure(label: str, c: Comparison, target: Target | None = None, *, n: int | None = None) -> Figure:
    """A comparison as a figure: "LABEL: 0.99× [0.98–1.00], within noise (target ≥ 0.98: met)"."""
    met = target.judge(c.low, c.high) if target is not None else None
    said = f" (target {target.text}: {met})" if target is not None else ""
    return Figure(
        "comparison",
        f"{label}: {fmt_ratio(c)}, {c.verdict}{said}",
        c.ratio,
        c.low,
        c.high,
        str(c.verdict),
        n,
        target=target.text if target is not None else None,
        met=met,
    )


def ratio(
    label: str,
    base: Sequence[float],
    new: Sequence[float],
    *,
    pairs: bool = True,
    higher_is_better: bool = True,
    target: Target | None = None,
) -> Figure:
    """``new`` over ``base``: measured in pairs (``compare_paired``: a t interval over the pairs' log
    ratios), or with ``pairs=False`` the ratio of the two arms' means, each value a batch
    (``compare`` over batch means)."""
    if pairs:
        c = compare_paired(base, new, higher_is_better=higher_is_better)
        return comparison_figure(label, c, target, n=len(base))
    c = compare(estimate_from_batches(list(base)), estimate_from_batches(list(new)), higher_is_better=higher_is_better)
    return comparison_figure(label, c, target, n=min(len(base), len(new)))


def estimates(label: str, base: Estimate, new: Estimate, *, target: Target | None = None) -> Figure:
    """Two estimates (a sweep's summaries, say) compared: ``compare``'s ratio, interval and verdict."""
    return comparison_figure(label, compare(base, new), target)


def estimate_figure(label: str, values: Sequence[float], unit: str = "") -> Figure:
    """The mean of some values with its interval (each value a batch): "LABEL: 48.2 ± 1.3 steps/s"."""
    e = estimate_from_batches(list(values))
    return Figure("estimate", f"{label}: {fmt_pm(e)}{' ' + unit if unit else ''}", e.mean, e.low, e.high, n=len(values))


def ratio_text(f: Figure, places: int | None = None) -> str:
    """A comparison figure's ratio and interval as a table cell: gpudash's format ("1.08× [0.98–1.19]"),
    or with ``places`` decimals where a goal is a per cent ("1.0012× [0.9990–1.0034]")."""
    assert f.value is not None, f"{f.text}: no ratio"
    if places is None:
        return fmt_ratio(Comparison(f.value, f.low, f.high, Verdict(f.verdict or Verdict.TOO_SHORT)))
    if f.low is None or f.high is None:
        return f"{f.value:.{places}f}× (no interval)"
    return f"{f.value:.{places}f}× [{f.low:.{places}f}–{f.high:.{places}f}]"


Z95 = 1.959964


def ratio_of_intervals(
    new: float, new_low: float | None, new_high: float | None, old: float, old_low: float | None, old_high: float | None
) -> tuple[float, float | None, float | None]:
    """``new``/``old`` where the runs published their 95% intervals and not their batch means (a tune
    run's candidates): the ratio's interval from the two, on the log scale, each taken as normal (the
    runs are independent). The one interval here that is not gpudash's ``compare``, which needs the
    batch means these runs did not keep."""
    r = new / old
    if new_low is None or new_high is None or old_low is None or old_high is None:
        return r, None, None
    se = math.hypot(math.log(new_high / new_low) / (2 * Z95), math.log(old_high / old_low) / (2 * Z95))
    return r, r * math.exp(-Z95 * se), r * math.exp(Z95 * se)
