"""Intervals and verdicts for throughput: is a change real, or noise? Torch- and Textual-free.

Per-interval samples of a run are autocorrelated (clocks, thermals, the allocator, loader
workers drift over seconds), so they are not independent draws. The method, in three lines:

1. **Batch means.** A configuration's samples (after warm-up) are cut into contiguous batches,
   fewer and longer while their means stay correlated (lag-1 > 0.2); such means are nearly
   independent and normal (Law & Kelton), so a Student-t interval over them is honest.
   A configuration measured in several *stretches* (a sweep's repeats, a recording's segments)
   also varies from stretch to stretch (load, clocks, placement), which batch means inside a
   stretch do not see: ``estimate_over_stretches`` takes the larger of the two variances of the
   mean, from the stretches' means (R − 1 degrees of freedom) or from every batch mean pooled
   (the one-way random-effects ANOVA estimate, truncated at no stretch-to-stretch variance).
2. **Ratio of two configurations** by the delta method on log means with Welch's degrees of
   freedom; the interval of the ratio is exp(log ratio ± t·se).
   Two configurations measured in interleaved pairs of rounds (benchmarks) compare by
   ``compare_paired`` instead: a t interval over the per-pair log ratios, so a drift that moves
   both rounds of a pair (a noisy host, clocks) cancels instead of widening the interval.
3. **Verdict** as criterion.rs does: the change must be significant (the interval excludes 1)
   *and* larger than a noise threshold (default 2%), else "no change detected" / "within noise".

A configuration measured in one stretch (the dashboard's segments, a sweep with ``--repeats 1``)
has no measure of its stretch-to-stretch variation: its interval is the within-run one.

``BatchMeans`` accumulates samples in bounded memory: at most ``MAX_BLOCKS`` blocks of equal
size; when full, neighbours merge (the block size doubles), so an hour-long segment costs
the same as a minute. Estimates re-batch the blocks into at most ``MAX_BATCHES`` batches.

**Long steps.** A batch is ``MIN_PER_BATCH`` samples at the least: two windows of a run's sampling
interval. A user's job whose steps are longer than that has a window a step, and a window that
holds one whole step of at least ``MIN_PER_BATCH`` intervals is a batch by itself (``add``'s
``alone``): its mean is that step's rate, measured over as long as a batch of short windows would
be, and the next step's is another (a 50 s step of LBFGS, not 16 such steps before an interval).
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
MAX_BATCHES = 10
MIN_PER_BATCH = 2  # samples per batch, at the least
MAX_BLOCKS = 64
MAX_LAG1 = 0.2  # batch means more correlated than this: use fewer, longer batches
MIN_SAMPLES_FOR_INTERVAL = MIN_BATCHES * MIN_PER_BATCH  # the fewest samples that can give one


def seconds_for_interval(n_samples: int, seconds_per_sample: float, alone: bool = False) -> float:
    """About how much longer a window of ``n_samples`` samples, each ``seconds_per_sample`` long,
    must run before it can have an interval (0: long enough; more when its samples drift);
    ``alone``: each sample is a batch by itself (a long step's: ``is_alone``)."""
    if alone:
        return max(0, MIN_BATCHES - n_samples) * seconds_per_sample
    return max(0, MIN_SAMPLES_FOR_INTERVAL - n_samples) * seconds_per_sample


def is_alone(interval_s: float, train_s: float | None) -> bool:
    """A job's window that holds at least ``MIN_PER_BATCH`` sampling intervals of training seconds
    (one long step): a batch by itself."""
    return train_s is not None and interval_s > 0 and train_s >= MIN_PER_BATCH * interval_s


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


class BatchMeans:
    """Weighted samples in at most ``MAX_BLOCKS`` contiguous blocks of equal size."""

    __slots__ = ("_blocks", "_block_size", "_open", "n", "units")

    def __init__(self) -> None:
        self._blocks: list[tuple[float, float]] = []  # (sum of value*weight, sum of weight)
        self._block_size = 1
        self._open: list[float] = [0.0, 0.0, 0]  # the block being filled: vw, w, count
        self.n = 0
        self.units = 0  # samples, a sample that is a batch alone counted MIN_PER_BATCH times

    def add(self, value: float | None, weight: float = 1.0, alone: bool = False) -> None:
        """A sample; ``alone``: one long enough to be a batch by itself (a long step's window)."""
        if value is None or weight <= 0 or math.isnan(value):
            return
        self.n += 1
        self.units += MIN_PER_BATCH if alone else 1
        o = self._open
        o[0] += value * weight
        o[1] += weight
        o[2] += 1
        if o[2] >= self._block_size:
            self._blocks.append((o[0], o[1]))
            self._open = [0.0, 0.0, 0]
            if len(self._blocks) >= MAX_BLOCKS:
                pairs = zip(self._blocks[0::2], self._blocks[1::2], strict=False)
                self._blocks = [(a[0] + b[0], a[1] + b[1]) for a, b in pairs]
                self._block_size *= 2

    @property
    def weight(self) -> float:
        """The samples' total weight."""
        return sum(b[1] for b in self._blocks) + self._open[1]

    @property
    def mean(self) -> float | None:
        vw = sum(b[0] for b in self._blocks) + self._open[0]
        w = sum(b[1] for b in self._blocks) + self._open[1]
        return vw / w if w > 0 else None

    def batches(self) -> list[float]:
        """Means of at most ``MAX_BATCHES`` contiguous batches of (nearly) equal size."""
        blocks = list(self._blocks)
        if self._open[2]:
            blocks.append((self._open[0], self._open[1]))
        k = min(MAX_BATCHES, self.units // MIN_PER_BATCH, len(blocks))
        if k <= 0:
            return []
        while True:
            out = []
            for i in range(k):
                part = blocks[i * len(blocks) // k : (i + 1) * len(blocks) // k]
                w = sum(b[1] for b in part)
                out.append(sum(b[0] for b in part) / w)
            if k // 2 < MIN_BATCHES or _lag1(out) <= MAX_LAG1:
                return out
            k //= 2  # the batches are still correlated: fewer, longer ones (Fishman's LBatch rule)

    def estimate(self, confidence: float = CONFIDENCE) -> Estimate | None:
        mean = self.mean
        if mean is None:
            return None
        return estimate_from_batches(self.batches(), mean, self.n, confidence)


def estimate_from_batches(
    batch_means: list[float], mean: float | None = None, n_samples: int | None = None, confidence: float = CONFIDENCE
) -> Estimate:
    """A Student-t interval over (nearly independent) batch means, or repeats' means."""
    k = len(batch_means)
    m = sum(batch_means) / k if mean is None else mean
    n = k if n_samples is None else n_samples
    if k < MIN_BATCHES:
        return Estimate(m, None, None, n, tuple(batch_means))
    sd = _sd(batch_means)
    hw = t_quantile(confidence, k - 1) * sd / math.sqrt(k)
    return Estimate(m, m - hw, m + hw, n, tuple(batch_means))


def estimate(
    values: list[float], weights: list[float] | None = None, confidence: float = CONFIDENCE
) -> Estimate | None:
    """The estimate of a sequence of samples (in time order), by batch means."""
    acc = BatchMeans()
    for i, v in enumerate(values):
        acc.add(v, 1.0 if weights is None else weights[i])
    return acc.estimate(confidence)


Stretch = tuple[float, float, Sequence[float]]  # (mean, weight, batch means) of one stretch


def estimate_over_stretches(
    stretches: Sequence[Stretch], n_samples: int, confidence: float = CONFIDENCE
) -> Estimate | None:
    """The estimate of one configuration measured in several stretches: the weighted mean, and an
    interval that counts the variation from stretch to stretch (None: no stretch has a sample).

    Model: stretch r's samples vary about its own level, and the levels vary about the
    configuration's (one-way random effects). The variance of the mean is estimated twice:
    from the stretches' means (their weighted pseudo-values M + R·wᵣ/W·(mᵣ − M), the cluster-robust
    variance, R − 1 degrees of freedom) and from every stretch's batch means pooled (no batch
    spans two stretches). The larger is the ANOVA estimate truncated at no stretch-to-stretch
    variance: the stretches' one when their means differ more than their batches say, else the
    pooled one. The chosen values become ``batch_means``, so ``compare`` (and a CSV read back)
    get the same variance and degrees of freedom. One stretch: ``estimate_from_batches``, as before.
    Fewer than ``MIN_SAMPLES_FOR_INTERVAL`` samples or two pooled batch means: no interval."""
    parts = [(m, w, tuple(b)) for m, w, b in stretches if w > 0]
    if not parts:
        return None
    pooled = [b for _, _, bs in parts for b in bs]
    if len(parts) == 1:
        return estimate_from_batches(pooled, parts[0][0], n_samples, confidence)
    weight = sum(w for _, w, _ in parts)
    mean = sum(m * w for m, w, _ in parts) / weight
    if n_samples < MIN_SAMPLES_FOR_INTERVAL or len(pooled) < 2:
        return Estimate(mean, None, None, n_samples, tuple(pooled))
    r = len(parts)
    pseudo = [mean + r * w / weight * (m - mean) for m, w, _ in parts]
    between, within = _sd(pseudo) ** 2 / r, _sd(pooled) ** 2 / len(pooled)
    values = pseudo if between > within else pooled
    hw = t_quantile(confidence, len(values) - 1) * math.sqrt(max(between, within))
    return Estimate(mean, mean - hw, mean + hw, n_samples, tuple(values))


class Stretches:
    """A configuration's samples in stretches (``new_stretch`` starts the next: a sweep's repeat),
    each its own ``BatchMeans``; ``estimate`` is ``estimate_over_stretches``."""

    __slots__ = ("parts",)

    def __init__(self) -> None:
        self.parts: list[BatchMeans] = [BatchMeans()]

    def add(self, value: float | None, weight: float = 1.0, alone: bool = False) -> None:
        self.parts[-1].add(value, weight, alone)

    def new_stretch(self) -> None:
        """The samples that follow belong to another stretch (a no-op before any sample)."""
        if self.parts[-1].n:
            self.parts.append(BatchMeans())

    @property
    def n(self) -> int:
        return sum(p.n for p in self.parts)

    @property
    def units(self) -> int:
        return sum(p.units for p in self.parts)

    @property
    def weight(self) -> float:
        return sum(p.weight for p in self.parts)

    @property
    def mean(self) -> float | None:
        if len(self.parts) == 1:
            return self.parts[0].mean
        weight = sum(p.weight for p in self.parts)
        return sum((p.mean or 0.0) * p.weight for p in self.parts) / weight if weight > 0 else None

    def estimate(self, confidence: float = CONFIDENCE) -> Estimate | None:
        stretches = [(p.mean, p.weight, p.batches()) for p in self.parts if p.mean is not None]
        return estimate_over_stretches(stretches, self.n, confidence)


def pool_estimates(parts: Sequence[Estimate], confidence: float = CONFIDENCE) -> Estimate | None:
    """One configuration's estimates from separate stretches (a recording's segments of it) as one,
    each weighted by its samples (``estimate_over_stretches``)."""
    stretches = [(e.mean, float(e.n_samples), e.batch_means) for e in parts]
    return estimate_over_stretches(stretches, sum(e.n_samples for e in parts), confidence)


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
    hw = t_quantile(confidence, k - 1) * _sd(logs) / math.sqrt(k)
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


def _lag1(xs: list[float]) -> float:
    """Lag-1 autocorrelation of a sequence (0 when it is constant)."""
    m = sum(xs) / len(xs)
    d = [x - m for x in xs]
    den = sum(v * v for v in d)
    return sum(a * b for a, b in zip(d, d[1:], strict=False)) / den if den > 0 else 0.0


def _sd(xs: list[float] | tuple[float, ...]) -> float:
    m = sum(xs) / len(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))


def _var_of_log_mean(e: Estimate) -> float:
    """Var(log mean) ≈ (sd / mean)² / k, from the batch means (delta method)."""
    k = len(e.batch_means)
    return (_sd(e.batch_means) / e.mean) ** 2 / k
