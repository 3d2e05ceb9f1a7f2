"""A mean's confidence interval from a run's autocorrelated samples, by batch means (the method:
``gpudash.stats.comparison``), in one stretch of a run or over several. Torch- and Textual-free.

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

from gpudash.stats.comparison import CONFIDENCE, MIN_BATCHES, Estimate, estimate_from_batches, sample_sd, t_quantile

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
    between, within = sample_sd(pseudo) ** 2 / r, sample_sd(pooled) ** 2 / len(pooled)
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


def _lag1(xs: list[float]) -> float:
    """Lag-1 autocorrelation of a sequence (0 when it is constant)."""
    m = sum(xs) / len(xs)
    d = [x - m for x in xs]
    den = sum(v * v for v in d)
    return sum(a * b for a, b in zip(d, d[1:], strict=False)) / den if den > 0 else 0.0
