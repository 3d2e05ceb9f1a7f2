"""The statistics: intervals that hold their coverage, verdicts that do not cry wolf."""

from __future__ import annotations

import numpy as np
import pytest

from gpudash.stats.batch_means import MAX_BLOCKS, BatchMeans, estimate
from gpudash.stats.comparison import Comparison, Estimate, Verdict, compare, compare_paired, estimate_from_batches
from gpudash.stats.fmt import fmt_ratio
from tests.messages import present


def _estimate(values: list[float]) -> Estimate:
    """The estimate of ``values``, which hold enough samples for one."""
    return present(estimate(values), "an estimate")


def _ends(value: Estimate | Comparison) -> tuple[float, float]:
    """The two ends of an interval the test expects to be there."""
    return present(value.low, "an interval"), present(value.high, "an interval")


# what the sweep measures by default: 3 repeats x 10 s x 10 samples a second
SWEEP_SAMPLES = 3 * 10 * 10


def _series(rng: np.random.Generator, mean: float, n: int, noise: float, phi: float = 0.0) -> list[float]:
    """Samples of a throughput with relative noise ``noise``; AR(1) with ``phi`` when > 0."""
    e = rng.normal(0.0, noise, n)
    if phi:
        x = np.empty(n)
        x[0] = e[0]
        scale = np.sqrt(1 - phi**2)
        for i in range(1, n):
            x[i] = phi * x[i - 1] + scale * e[i]
        e = x
    return list(mean * (1.0 + e))


@pytest.mark.parametrize("phi", [0.0, 0.5])
def test_a_against_a_rarely_cries_wolf(phi: float) -> None:
    """500 A/A comparisons with 10% noise (independent, then autocorrelated): a verdict of
    faster or slower in at most 5% of them."""
    rng = np.random.default_rng(1)
    alarms = 0
    for _ in range(500):
        a = _estimate(_series(rng, 200.0, SWEEP_SAMPLES, 0.10, phi))
        b = _estimate(_series(rng, 200.0, SWEEP_SAMPLES, 0.10, phi))
        alarms += compare(a, b).verdict.real
    assert alarms / 500 <= 0.05


def test_a_true_five_percent_change_is_found() -> None:
    """A 5% speed-up under 10% noise, at the sweep's sample count: found in at least 90% of
    500 trials, and never called slower."""
    rng = np.random.default_rng(2)
    verdicts = [
        compare(
            _estimate(_series(rng, 200.0, SWEEP_SAMPLES, 0.10)), _estimate(_series(rng, 210.0, SWEEP_SAMPLES, 0.10))
        ).verdict
        for _ in range(500)
    ]
    assert verdicts.count(Verdict.FASTER) / 500 >= 0.90
    assert Verdict.SLOWER not in verdicts


def test_the_interval_covers_the_true_mean_about_95_percent_of_the_time() -> None:
    rng = np.random.default_rng(3)
    covered = 0
    for _ in range(400):
        e = _estimate(_series(rng, 100.0, SWEEP_SAMPLES, 0.10, phi=0.5))
        low, high = _ends(e)
        covered += low <= 100.0 <= high
    assert 0.88 <= covered / 400 <= 0.99


def test_lower_is_better_metrics_flip_the_verdict() -> None:
    rng = np.random.default_rng(4)
    base = _estimate(_series(rng, 10.0, 200, 0.02))
    worse = _estimate(_series(rng, 12.0, 200, 0.02))
    assert compare(base, worse, higher_is_better=False).verdict == Verdict.SLOWER
    assert compare(base, worse).verdict == Verdict.FASTER


def test_a_significant_but_tiny_change_is_within_noise() -> None:
    rng = np.random.default_rng(5)
    base = _estimate(_series(rng, 100.0, 4000, 0.01))
    new = _estimate(_series(rng, 101.0, 4000, 0.01))  # +1%: certain, but below the 2% threshold
    c = compare(base, new)
    low, high = _ends(c)
    assert low > 1.0 and c.verdict == Verdict.WITHIN_NOISE
    # a third decimal: the interval is narrower than 0.01, so its two ends do not print the same
    assert fmt_ratio(c) == f"1.010× [{low:.3f}–{high:.3f}]" and low < high


def test_too_few_samples_give_no_interval_and_no_verdict() -> None:
    short = estimate([100.0, 101.0, 99.0])
    assert short is not None and not short.has_interval
    long = _estimate([100.0] * 50)
    assert compare(short, long).verdict == Verdict.TOO_SHORT
    assert estimate([]) is None


def test_batch_means_stay_bounded_and_keep_the_weighted_mean() -> None:
    acc = BatchMeans()
    rng = np.random.default_rng(6)
    vals, weights = rng.normal(100, 5, 100_000), rng.uniform(0.2, 0.3, 100_000)
    for v, w in zip(vals, weights, strict=False):
        acc.add(float(v), float(w))
    assert len(acc._blocks) < MAX_BLOCKS
    assert acc.mean == pytest.approx(float(np.average(vals, weights=weights)))
    assert len(acc.batches()) == 10


def test_repeats_give_an_interval_too() -> None:
    e = estimate_from_batches([100.0, 102.0, 98.0, 101.0])
    low, high = _ends(e)
    assert e.has_interval and low < 100.25 < high


def test_a_change_from_zero_is_real_when_the_other_side_is_clearly_not_zero() -> None:
    zero = _estimate([0.0] * 40)
    six = _estimate([6.0] * 40)
    assert compare(zero, zero).verdict == Verdict.NO_CHANGE
    c = compare(zero, six, higher_is_better=False)  # syncs per step: 0 -> 6 is worse
    assert c.verdict == Verdict.SLOWER and not c.finite
    assert compare(six, zero, higher_is_better=False).verdict == Verdict.FASTER


@pytest.mark.parametrize("df", [3, 4, 5, 8, 13, 30, 100, 1000])
@pytest.mark.parametrize("confidence", [0.90, 0.95, 0.99])
def test_the_t_quantile_is_students_to_its_documented_precision(df: int, confidence: float) -> None:
    """Every interval's width rests on it: the Cornish-Fisher expansion against scipy's exact one,
    within 0.13% up to 95% confidence (the one gpudash uses), within 0.8% at 99%."""
    from scipy.stats import t

    from gpudash.stats.comparison import t_quantile

    exact = t.ppf(0.5 + confidence / 2, df)
    assert t_quantile(confidence, df) == pytest.approx(exact, rel=0.0013 if confidence <= 0.95 else 0.008)


def _drifting_pairs(rng: np.random.Generator, ratio: float, rounds: int) -> tuple[list[float], list[float]]:
    """Interleaved rounds on a host whose speed drifts ±20% from round to round (both sides of a
    round see the same drift) with 2% noise of each measurement's own."""
    drift = 1.0 + rng.uniform(-0.2, 0.2, rounds)
    base = 800.0 * drift * (1.0 + rng.normal(0.0, 0.02, rounds))
    new = 800.0 * ratio * drift * (1.0 + rng.normal(0.0, 0.02, rounds))
    return list(base), list(new)


def test_paired_rounds_see_through_a_drift_that_hides_a_change_from_two_means() -> None:
    """A 3% slowdown under a host drift shared by each pair: the paired comparison calls it slower
    with an interval around 0.97; the ratio of the two means cannot tell it from noise."""
    base, new = _drifting_pairs(np.random.default_rng(7), 0.97, 60)
    paired = compare_paired(base, new)
    unpaired = compare(estimate_from_batches(base), estimate_from_batches(new))
    assert paired.verdict is Verdict.SLOWER
    assert paired.low is not None and paired.high is not None
    assert paired.low < 0.97 < paired.high and paired.high - paired.low < 0.03
    assert unpaired.verdict is Verdict.NO_CHANGE


def test_paired_a_against_a_rarely_cries_wolf_and_covers_the_true_ratio() -> None:
    rng = np.random.default_rng(8)
    alarms = covered = 0
    for _ in range(400):
        c = compare_paired(*_drifting_pairs(rng, 1.0, 30))
        alarms += c.verdict.real
        low, high = _ends(c)
        covered += low <= 1.0 <= high
    assert alarms / 400 <= 0.05
    assert 0.92 <= covered / 400 <= 0.98


def test_paired_needs_equal_rounds_positive_values_and_enough_pairs() -> None:
    with pytest.raises(ValueError, match="as many rounds"):
        compare_paired([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="positive"):
        compare_paired([1.0, 0.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0])
    short = compare_paired([100.0, 100.0, 100.0], [90.0, 90.0, 90.0])
    assert short.verdict is Verdict.TOO_SHORT and short.low is None and abs(short.ratio - 0.9) < 1e-12
