"""Intervals and verdicts for throughput: is a change real, or noise? Torch- and Textual-free.

Per-interval samples of a run are autocorrelated (clocks, thermals, the allocator, loader
workers drift over seconds), so they are not independent draws. The method, in three lines:

1. **Batch means.** A configuration's samples (after warm-up) are cut into contiguous batches,
   fewer and longer while their means stay correlated (lag-1 > 0.2); such means are nearly
   independent and normal (Law & Kelton), so a Student-t interval over them is honest.
   A configuration measured in several *stretches* (a sweep's repeats, a recording's segments)
   also varies from stretch to stretch (load, clocks, placement), which batch means inside a
   stretch do not see: ``estimate_over_stretches`` (``gpudash.stats.batch_means``, where the
   batches are made) takes the larger of the two variances of the mean, from the stretches' means
   (R − 1 degrees of freedom) or from every batch mean pooled (the one-way random-effects ANOVA
   estimate, truncated at no stretch-to-stretch variance).
2. **Ratio of two configurations** by the delta method on log means with Welch's degrees of
   freedom; the interval of the ratio is exp(log ratio ± t·se).
   Two configurations measured in interleaved pairs of rounds (benchmarks) compare by
   ``compare_paired`` instead: a t interval over the per-pair log ratios, so a drift that moves
   both rounds of a pair (a noisy host, clocks) cancels instead of widening the interval.
3. **Verdict** as criterion.rs does: the change must be significant (the interval excludes 1)
   *and* larger than a noise threshold (default 2%), else "no change detected" / "within noise".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from functools import lru_cache
from statistics import NormalDist

CONFIDENCE = 0.95
NOISE_THRESHOLD = 0.02  # a change smaller than this is "within noise" even when significant
MIN_BATCHES = 4  # fewer batches: no interval ("too short")


class Verdict(str, Enum):
    FASTER = "faster"  # better, beyond the noise threshold, significant
    SLOWER = "slower"  # worse, beyond the noise threshold, significant
    WITHIN_NOISE = "within noise"  # significant, but smaller than the noise threshold
    NO_CHANGE = "no change detected"  # not significant
    TOO_SHORT = "too short"  # one side has no interval yet

    def __str__(self) -> str:
        return self.value

    @property
    def real(self) -> bool:
        """A difference worth colouring."""
        return self in (Verdict.FASTER, Verdict.SLOWER)


@dataclass(frozen=True)
class Estimate:
    """A mean with its confidence interval (None when too few samples for one)."""

    mean: float
    low: float | None
    high: float | None
    n_samples: int
    batch_means: tuple[float, ...] = ()

    @property
    def has_interval(self) -> bool:
        return self.low is not None and self.high is not None

    @property
    def half_width(self) -> float | None:
        return None if self.low is None or self.high is None else (self.high - self.low) / 2

    @property
    def rel_half_width(self) -> float | None:
        """The interval's half-width as a share of the mean (0.02 = ±2%)."""
        hw = self.half_width
        return None if hw is None or self.mean == 0 else abs(hw / self.mean)


@dataclass(frozen=True)
class Comparison:
    """``new`` against ``base``: the ratio new/base with its interval, and the verdict."""

    ratio: float
    low: float | None
    high: float | None
    verdict: Verdict

    @property
    def change_pct(self) -> float:
        return (self.ratio - 1.0) * 100.0

    @property
    def finite(self) -> bool:
        """A ratio that can be printed (neither side at zero)."""
        return math.isfinite(self.ratio) and self.ratio > 0


def estimate_from_batches(
    batch_means: list[float], mean: float | None = None, n_samples: int | None = None, confidence: float = CONFIDENCE
) -> Estimate:
    """A Student-t interval over (nearly independent) batch means, or repeats' means."""
    k = len(batch_means)
    m = sum(batch_means) / k if mean is None else mean
    n = k if n_samples is None else n_samples
    if k < MIN_BATCHES:
        return Estimate(m, None, None, n, tuple(batch_means))
    sd = sample_sd(batch_means)
    hw = t_quantile(confidence, k - 1) * sd / math.sqrt(k)
    return Estimate(m, m - hw, m + hw, n, tuple(batch_means))


def compare(
    base: Estimate,
    new: Estimate,
    *,
    higher_is_better: bool = True,
    noise: float = NOISE_THRESHOLD,
    confidence: float = CONFIDENCE,
) -> Comparison:
    """``new`` against ``base`` (ratio new/base), with an interval and a verdict."""
    if base.mean <= 0 or new.mean <= 0:
        return _compare_with_zero(base, new, higher_is_better)
    ratio = new.mean / base.mean
    if not (base.has_interval and new.has_interval):
        return Comparison(ratio, None, None, Verdict.TOO_SHORT)
    va = _var_of_log_mean(base)
    vb = _var_of_log_mean(new)
    se = math.sqrt(va + vb)
    if se == 0:
        significant, low, high = ratio != 1.0, ratio, ratio
    else:
        ka, kb = len(base.batch_means), len(new.batch_means)
        df = (va + vb) ** 2 / (va**2 / (ka - 1) + vb**2 / (kb - 1))  # Welch-Satterthwaite (se > 0: va + vb > 0)
        t = t_quantile(confidence, df)
        log_r = math.log(ratio)
        low, high = math.exp(log_r - t * se), math.exp(log_r + t * se)
        significant = low > 1.0 or high < 1.0
    return Comparison(ratio, low, high, _verdict(ratio, significant, higher_is_better, noise))


def compare_paired(
    base: Sequence[float],
    new: Sequence[float],
    *,
    higher_is_better: bool = True,
    noise: float = NOISE_THRESHOLD,
    confidence: float = CONFIDENCE,
) -> Comparison:
    """``new`` against ``base`` measured in pairs: ``base[i]`` and ``new[i]`` come from the same
    round of an interleaved benchmark. The ratio is the geometric mean of the per-pair ratios,
    its interval a Student-t one over their logs; fewer than ``MIN_BATCHES`` pairs: no interval.
    Raises ValueError for unequal lengths or a value that is not positive."""
    if len(base) != len(new):
        raise ValueError(f"paired comparison needs as many rounds on each side ({len(base)} vs {len(new)})")
    if not base or any(not (v > 0 and math.isfinite(v)) for v in (*base, *new)):
        raise ValueError("paired comparison needs positive, finite values on both sides")
    logs = [math.log(b / a) for a, b in zip(base, new, strict=True)]
    k = len(logs)
    mean = sum(logs) / k
    ratio = math.exp(mean)
    if k < MIN_BATCHES:
        return Comparison(ratio, None, None, Verdict.TOO_SHORT)
    hw = t_quantile(confidence, k - 1) * sample_sd(logs) / math.sqrt(k)
    low, high = math.exp(mean - hw), math.exp(mean + hw)
    significant = low > 1.0 or high < 1.0
    return Comparison(ratio, low, high, _verdict(ratio, significant, higher_is_better, noise))


def _compare_with_zero(base: Estimate, new: Estimate, higher_is_better: bool) -> Comparison:
    """A side at zero (syncs per step, say): no ratio interval; real when the other side's
    interval excludes zero."""
    if base.mean <= 0 and new.mean <= 0:
        return Comparison(1.0, None, None, Verdict.NO_CHANGE)
    other = new if base.mean <= 0 else base
    ratio = math.inf if base.mean <= 0 else 0.0
    if not other.has_interval:
        return Comparison(ratio, None, None, Verdict.TOO_SHORT)
    assert other.low is not None  # has_interval
    if not other.low > 0:
        return Comparison(ratio, None, None, Verdict.NO_CHANGE)
    return Comparison(ratio, None, None, _verdict(ratio, True, higher_is_better, 0.0))


def _verdict(ratio: float, significant: bool, higher_is_better: bool, noise: float) -> Verdict:
    if not significant:
        return Verdict.NO_CHANGE
    if abs(ratio - 1.0) < noise:
        return Verdict.WITHIN_NOISE
    better = (ratio > 1.0) == higher_is_better
    return Verdict.FASTER if better else Verdict.SLOWER


def t_quantile(confidence: float, df: float) -> float:
    """Student's t quantile by the Cornish-Fisher expansion around the normal one: within
    0.12% of the exact value from 3 degrees of freedom up, and no scipy import on the dashboard's
    thread. Below 3 (an interval over two or three stretches' means) it is exact: ``_t_exact``."""
    if df < 3:
        return _t_exact(confidence, df)
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
    g4 = (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160
    return z + g1 / df + g2 / df**2 + g3 / df**3 + g4 / df**4


@lru_cache(maxsize=256)
def _t_exact(confidence: float, df: float) -> float:
    """The two-sided ``confidence`` quantile of Student's t with ``df`` > 0 degrees of freedom, by
    bisection on its distribution function: P(|T| > t) = I_{df/(df+t²)}(df/2, 1/2)."""
    tail = 1.0 - confidence
    low, high = 0.0, 1.0
    while _beta_reg(df / (df + high * high), df / 2, 0.5) > tail:
        high *= 2
    for _ in range(100):
        mid = (low + high) / 2
        if _beta_reg(df / (df + mid * mid), df / 2, 0.5) > tail:
            low = mid
        else:
            high = mid
    return (low + high) / 2


def _beta_reg(x: float, a: float, b: float) -> float:
    """The regularized incomplete beta function I_x(a, b), by its continued fraction (Lentz)."""
    if x <= 0.0 or x >= 1.0:
        return 0.0 if x <= 0.0 else 1.0
    if x > (a + 1) / (a + b + 2):
        return 1.0 - _beta_reg(1.0 - x, b, a)
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)) / a
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    f = d
    for m in range(1, 300):
        for num in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            f *= c * d
        if abs(c * d - 1.0) < 1e-15:
            break
    return front * f


def sample_sd(xs: list[float] | tuple[float, ...]) -> float:
    """The standard deviation of a sample (n − 1 in the denominator)."""
    m = sum(xs) / len(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))


def _var_of_log_mean(e: Estimate) -> float:
    """Var(log mean) ≈ (sd / mean)² / k, from the batch means (delta method)."""
    k = len(e.batch_means)
    return (sample_sd(e.batch_means) / e.mean) ** 2 / k
