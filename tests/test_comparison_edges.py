"""The statistics at their edges: intervals of correlated samples, exact widths, verdicts at their
thresholds, sides at zero, samples that are not numbers. Every figure here is deterministic (fixed
seeds, constructed series)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import t as student_t

from gpudash.stats.batch_means import MAX_BLOCKS, MIN_SAMPLES_FOR_INTERVAL, BatchMeans, estimate, seconds_for_interval
from gpudash.stats.comparison import Comparison, Estimate, Verdict, compare, estimate_from_batches, t_quantile


def ar1(rng: np.random.Generator, n: int, phi: float, mean: float = 100.0, noise: float = 0.10) -> list[float]:
    """An AR(1) throughput: each sample's deviation is ``phi`` times the previous one's plus noise."""
    e = rng.normal(0.0, noise, n)
    x = np.empty(n)
    x[0] = e[0]
    for i in range(1, n):
        x[i] = phi * x[i - 1] + math.sqrt(1 - phi**2) * e[i]
    return list(mean * (1.0 + x))


def exact_half_width(values: list[float], confidence: float = 0.95) -> float:
    """The half-width of Student's t interval over ``values`` as independent draws, with scipy's
    exact quantile (``t_quantile`` is within 0.13% of it from 3 degrees of freedom up)."""
    k = len(values)
    return float(student_t.ppf(0.5 + confidence / 2, k - 1) * np.std(values, ddof=1) / math.sqrt(k))


# -- correlated samples -------------------------------------------------------------------------------


def test_correlated_samples_get_an_honest_interval_where_the_naive_one_is_far_too_narrow() -> None:
    """300 runs of an AR(1) throughput (phi 0.8, 300 samples): the naive interval, which takes each
    sample as an independent draw, covers the true mean in about half of them; the batch-means
    interval in about 95%, and it is the wider of the two every time."""
    rng = np.random.default_rng(11)
    covered = naive_covered = wider = 0
    runs = 300
    for _ in range(runs):
        values = ar1(rng, 300, 0.8)
        e, naive = estimate(values), estimate_from_batches(values)
        assert e is not None and e.low is not None and e.high is not None
        assert naive.low is not None and naive.high is not None and naive.half_width is not None
        covered += e.low <= 100.0 <= e.high
        naive_covered += naive.low <= 100.0 <= naive.high
        wider += e.half_width is not None and e.half_width > naive.half_width
    assert covered / runs >= 0.88
    assert naive_covered / runs <= 0.60
    assert wider == runs


def test_a_drifting_series_gets_fewer_longer_batches() -> None:
    """128 samples 0, 1, …, 127 (a drift): 32 blocks of 4 samples; ten batches' means would be
    correlated, so the interval rests on five longer ones (of 24, 24, 28, 24 and 28 samples)."""
    acc = BatchMeans()
    for v in range(128):
        acc.add(float(v))
    assert acc.n == 128
    assert acc.batches() == [11.5, 35.5, 61.5, 87.5, 113.5]
    e = acc.estimate()
    assert e is not None and e.batch_means == (11.5, 35.5, 61.5, 87.5, 113.5) and e.mean == 63.5
    assert e.half_width == pytest.approx(exact_half_width([11.5, 35.5, 61.5, 87.5, 113.5]), rel=4e-4)
    assert e.low is not None and e.high is not None and e.low + e.high == pytest.approx(2 * 63.5)  # around the mean


def test_an_alternating_series_keeps_ten_batches_of_whole_blocks() -> None:
    """+1/-1 alternating around 50, 100 samples: blocks of 2 after the first merge, so every
    batch's mean is exactly 50 and the ten batches stay (their lag-1 correlation is 0)."""
    acc = BatchMeans()
    for i in range(100):
        acc.add(50.0 + (1.0 if i % 2 else -1.0))
    assert acc.batches() == [50.0] * 10
    e = acc.estimate()
    assert e is not None and (e.mean, e.low, e.high, e.n_samples) == (50.0, 50.0, 50.0, 100)


def test_blocks_merge_in_neighbouring_pairs_when_full() -> None:
    """The 64th sample fills the blocks: neighbours merge into 32 of two samples each, so a
    batch is always a run of whole, contiguous samples, whatever the series' length."""
    acc = BatchMeans()
    for v in range(MAX_BLOCKS):
        acc.add(float(v), 1.0)
    # a drift: five batches of 6, 6, 7, 6 and 7 blocks of two samples (0-11, 12-23, 24-37, …)
    assert acc.batches() == [5.5, 17.5, 30.5, 43.5, 56.5]
    acc.add(64.0)  # a block still filling counts as one of its own: 33 blocks
    assert acc.batches() == [5.5, 18.5, 31.5, 44.5, 58.0]
    assert acc.mean == 32.0 and acc.n == 65


def test_a_few_samples_make_as_many_batches_as_two_samples_each_allow() -> None:
    acc = BatchMeans()
    for v in (1.0, 3.0, 5.0, 7.0, 9.0, 11.0, 13.0):
        acc.add(v)
    assert acc.batches() == [2.0, 6.0, 11.0]  # 7 samples: three batches (of 2, 2 and 3), not seven
    assert BatchMeans().batches() == [] and BatchMeans().estimate() is None
    one = BatchMeans()
    one.add(4.0)
    assert one.batches() == [] and one.estimate() == Estimate(4.0, None, None, 1, ())


def test_samples_that_are_not_numbers_or_have_no_weight_are_not_counted() -> None:
    acc = BatchMeans()
    for value, weight in ((None, 1.0), (math.nan, 1.0), (10.0, 0.0), (10.0, -1.0)):
        acc.add(value, weight)
    assert acc.n == 0 and acc.mean is None
    acc.add(2.0, 3.0)
    acc.add(6.0, 1.0)
    assert acc.n == 2 and acc.mean == 3.0  # weighted: (2·3 + 6·1) / 4
    assert estimate([2.0, 6.0], [3.0, 1.0]) == Estimate(3.0, None, None, 2, (3.0,))


# -- exact widths ------------------------------------------------------------------------------------


def test_the_interval_over_batch_means_is_students_t_to_the_quantiles_precision() -> None:
    e = estimate_from_batches([1.0, 2.0, 3.0, 4.0])
    assert (e.mean, e.n_samples, e.batch_means) == (2.5, 4, (1.0, 2.0, 3.0, 4.0))
    assert e.half_width == pytest.approx(exact_half_width([1.0, 2.0, 3.0, 4.0]), rel=1.3e-3)
    assert e.low is not None and e.high is not None and e.low + e.high == pytest.approx(5.0)
    e90 = estimate_from_batches([1.0, 2.0, 3.0, 4.0], confidence=0.90)
    assert e90.half_width == pytest.approx(exact_half_width([1.0, 2.0, 3.0, 4.0], 0.90), rel=1.3e-3)
    given = estimate_from_batches([1.0, 2.0, 3.0, 4.0], mean=2.0, n_samples=80)  # a weighted mean, its samples
    assert (given.mean, given.n_samples) == (2.0, 80)
    assert (given.low, given.high) == pytest.approx((2.0 - e.half_width, 2.0 + e.half_width))  # type: ignore[operator]


def test_three_batches_are_too_few_for_an_interval_but_keep_their_mean() -> None:
    e = estimate_from_batches([1.0, 2.0, 6.0])
    assert e == Estimate(3.0, None, None, 3, (1.0, 2.0, 6.0))
    assert not e.has_interval and e.half_width is None and e.rel_half_width is None


@pytest.mark.parametrize("df", [3, 4, 5, 6, 8, 10, 13, 20, 30, 100])
@pytest.mark.parametrize(("confidence", "bound"), [(0.90, 0.15), (0.95, 0.4), (0.99, 3.5)])
def test_the_t_quantile_is_within_the_size_of_the_expansions_next_term(
    df: int, confidence: float, bound: float
) -> None:
    """The Cornish-Fisher expansion's error falls as 1/df⁵ (the first term it leaves out): within
    0.4/df⁵ of scipy's exact quantile at 95% (0.12% at 3 degrees of freedom, 4e-11 at 100)."""
    exact = student_t.ppf(0.5 + confidence / 2, df)
    assert t_quantile(confidence, df) == pytest.approx(exact, rel=bound / df**5)


def test_how_long_until_an_interval() -> None:
    assert MIN_SAMPLES_FOR_INTERVAL == 8
    assert seconds_for_interval(0, 0.5) == 4.0
    assert seconds_for_interval(7, 2.0) == 2.0
    assert seconds_for_interval(8, 0.5) == 0.0 and seconds_for_interval(20, 0.5) == 0.0
    assert estimate([1.0, 2.0] * 3) is not None and not estimate([1.0, 2.0] * 3).has_interval  # type: ignore[union-attr]
    assert estimate([1.0, 2.0] * 4).has_interval  # type: ignore[union-attr]


def test_an_estimates_half_widths() -> None:
    e = Estimate(200.0, 190.0, 230.0, 50)
    assert e.has_interval and e.half_width == 20.0 and e.rel_half_width == 0.1
    assert Estimate(-200.0, -230.0, -190.0, 50).rel_half_width == 0.1  # a share, never negative
    assert Estimate(0.0, -1.0, 1.0, 50).rel_half_width is None  # no share of zero
    for low, high in ((190.0, None), (None, 230.0)):
        half = Estimate(200.0, low, high, 50)
        assert not half.has_interval and half.half_width is None and half.rel_half_width is None


# -- comparisons -------------------------------------------------------------------------------------


def welch(base: list[float], new: list[float], confidence: float = 0.95) -> tuple[float, float]:
    """The ratio new/base's interval by the delta method on log means, Welch's degrees of freedom
    and scipy's exact quantile: what ``compare`` computes."""
    va = (np.std(base, ddof=1) / np.mean(base)) ** 2 / len(base)
    vb = (np.std(new, ddof=1) / np.mean(new)) ** 2 / len(new)
    df = (va + vb) ** 2 / (va**2 / (len(base) - 1) + vb**2 / (len(new) - 1))
    q = student_t.ppf(0.5 + confidence / 2, df)
    log_r, se = math.log(np.mean(new) / np.mean(base)), math.sqrt(va + vb)
    return math.exp(log_r - q * se), math.exp(log_r + q * se)


@pytest.mark.parametrize(
    ("base", "new"),
    [
        ([80.0, 120.0, 90.0, 110.0], [100.0, 150.0, 130.0, 140.0]),  # 4 and 4 batches, one noisier
        ([99.0, 101.0, 100.0, 100.5, 99.5], [140.0, 100.0, 130.0, 110.0, 160.0, 90.0, 120.0]),  # unequal
        ([100.0, 110.0, 105.0, 95.0, 90.0, 100.0], [100.0, 101.0, 100.5, 99.5, 99.0, 100.0, 100.2, 99.8]),
    ],
)
def test_a_ratios_interval_is_the_delta_method_with_welchs_degrees_of_freedom(
    base: list[float], new: list[float]
) -> None:
    b, n = estimate_from_batches(base), estimate_from_batches(new)
    c = compare(b, n)
    assert c.ratio == pytest.approx(np.mean(new) / np.mean(base))
    assert (c.low, c.high) == pytest.approx(welch(base, new), rel=2e-4)
    c90 = compare(b, n, confidence=0.90)
    assert (c90.low, c90.high) == pytest.approx(welch(base, new, 0.90), rel=2e-4)


def test_verdicts_follow_the_interval_and_the_noise_threshold() -> None:
    base = estimate_from_batches([80.0, 120.0, 90.0, 110.0])
    noisy_faster = estimate_from_batches([100.0, 150.0, 130.0, 140.0])
    c = compare(base, noisy_faster)  # 1.30× but the interval reaches below 1: not significant
    assert c.low is not None and c.low < 1.0 < c.high  # type: ignore[operator]
    assert c.verdict == Verdict.NO_CHANGE and not c.verdict.real
    tight = estimate_from_batches([100.0, 101.0, 99.0, 100.0])
    faster = compare(tight, estimate_from_batches([130.0, 131.0, 129.0, 130.0]))
    assert faster.low > 1.0 and faster.verdict == Verdict.FASTER  # type: ignore[operator]
    assert compare(tight, estimate_from_batches([130.0, 131.0, 129.0, 130.0]), higher_is_better=False).verdict == (
        Verdict.SLOWER
    )
    slower = compare(tight, estimate_from_batches([70.0, 71.0, 69.0, 70.0]))
    assert slower.high < 1.0 and slower.verdict == Verdict.SLOWER  # type: ignore[operator]
    assert compare(tight, estimate_from_batches([70.0, 71.0, 69.0, 70.0]), higher_is_better=False).verdict == (
        Verdict.FASTER
    )
    # the same +30%, certain, against a threshold of 50%: within noise
    assert compare(tight, estimate_from_batches([130.0, 131.0, 129.0, 130.0]), noise=0.5).verdict == (
        Verdict.WITHIN_NOISE
    )


def test_a_change_exactly_at_the_noise_threshold_is_real() -> None:
    """Constant samples (no spread: the ratio is certain) 100 → 125 against a threshold of 25%:
    a change as large as the threshold is not "within noise"; 100 → 124 is."""
    base = estimate([100.0] * 40)
    assert base is not None
    at = compare(base, estimate([125.0] * 40), noise=0.25)  # type: ignore[arg-type]
    assert at == Comparison(1.25, 1.25, 1.25, Verdict.FASTER)
    assert compare(base, estimate([75.0] * 40), noise=0.25).verdict == Verdict.SLOWER  # type: ignore[arg-type]
    below = compare(base, estimate([124.0] * 40), noise=0.25)  # type: ignore[arg-type]
    assert below.verdict == Verdict.WITHIN_NOISE
    same = compare(base, base)
    assert same == Comparison(1.0, 1.0, 1.0, Verdict.NO_CHANGE)


def test_one_side_without_an_interval_is_too_short_either_way() -> None:
    long = estimate_from_batches([100.0, 101.0, 99.0, 100.0])
    short = estimate_from_batches([150.0, 151.0])
    assert compare(long, short) == Comparison(1.505, None, None, Verdict.TOO_SHORT)
    assert compare(short, long).verdict == Verdict.TOO_SHORT
    assert compare(short, long).ratio == pytest.approx(100.0 / 150.5)


def test_a_side_at_zero() -> None:
    """Syncs per step, say: 0 on one side. No ratio interval; real only when the other side's
    interval excludes zero; one that touches zero gets no verdict worth colouring."""
    zero = Estimate(0.0, 0.0, 0.0, 40, (0.0,) * 4)
    six = Estimate(6.0, 5.0, 7.0, 40, (6.0,) * 4)
    assert compare(zero, zero) == Comparison(1.0, None, None, Verdict.NO_CHANGE)
    assert compare(zero, six) == Comparison(math.inf, None, None, Verdict.FASTER)
    assert compare(six, zero) == Comparison(0.0, None, None, Verdict.SLOWER)
    assert compare(zero, six, higher_is_better=False).verdict == Verdict.SLOWER
    assert compare(six, zero, higher_is_better=False).verdict == Verdict.FASTER
    touching = Estimate(6.0, 0.0, 12.0, 40, (0.0, 6.0, 6.0, 12.0))
    for c in (compare(zero, touching), compare(touching, zero)):
        assert c.verdict == Verdict.NO_CHANGE and not c.verdict.real and (c.low, c.high) == (None, None)
    below = Estimate(6.0, -1.0, 13.0, 40, (0.0, 6.0, 6.0, 12.0))
    assert compare(zero, below).verdict == Verdict.NO_CHANGE
    short = Estimate(6.0, None, None, 3, (6.0,))
    assert compare(zero, short) == Comparison(math.inf, None, None, Verdict.TOO_SHORT)
    assert compare(short, zero) == Comparison(0.0, None, None, Verdict.TOO_SHORT)
    negative = Estimate(-1.0, -2.0, 0.0, 40)  # a mean below zero counts as zero
    assert compare(negative, six).ratio == math.inf and compare(six, negative).ratio == 0.0


def test_a_comparisons_change_and_whether_it_prints() -> None:
    assert Comparison(1.25, None, None, Verdict.TOO_SHORT).change_pct == 25.0
    assert Comparison(0.5, None, None, Verdict.TOO_SHORT).change_pct == -50.0
    assert Comparison(1.0, 1.0, 1.0, Verdict.NO_CHANGE).finite
    for ratio in (0.0, math.inf, math.nan, -1.0):
        assert not Comparison(ratio, None, None, Verdict.NO_CHANGE).finite


def test_only_faster_and_slower_are_real_and_each_prints_as_its_value() -> None:
    assert [v for v in Verdict if v.real] == [Verdict.FASTER, Verdict.SLOWER]
    assert [str(v) for v in Verdict] == ["faster", "slower", "within noise", "no change detected", "too short"]


def test_means_below_one_compare_as_ratios_and_against_zero() -> None:
    """Syncs per step of 0.5 and 0.6 are a ratio like any other; 0.5 against 0 is a change from
    zero, real when 0.5's interval (0.4 to 0.6) excludes zero."""
    half = estimate_from_batches([0.5, 0.49, 0.51, 0.5])
    more = estimate_from_batches([0.6, 0.59, 0.61, 0.6])
    c = compare(half, more)
    assert c.ratio == pytest.approx(1.2) and c.low is not None and c.low > 1.0 and c.verdict == Verdict.FASTER
    assert compare(more, half).verdict == Verdict.SLOWER and compare(more, half).high is not None
    zero = Estimate(0.0, 0.0, 0.0, 40, (0.0,) * 4)
    point_five = Estimate(0.5, 0.4, 0.6, 40, (0.4, 0.5, 0.5, 0.6))
    assert compare(point_five, zero) == Comparison(0.0, None, None, Verdict.SLOWER)
    assert compare(zero, point_five) == Comparison(math.inf, None, None, Verdict.FASTER)
    assert compare(zero, point_five, higher_is_better=False).verdict == Verdict.SLOWER
    touching = Estimate(0.5, 0.0, 1.0, 40, (0.0, 0.5, 0.5, 1.0))
    assert compare(zero, touching) == Comparison(math.inf, None, None, Verdict.NO_CHANGE)
    assert compare(touching, zero) == Comparison(0.0, None, None, Verdict.NO_CHANGE)


def drift(n: int, start: float = 0.0, step: float = 1.0) -> BatchMeans:
    acc = BatchMeans()
    for i in range(n):
        acc.add(start + i * step)
    return acc


def test_a_small_drift_over_sixteen_samples_makes_four_batches_of_four_not_eight_of_two() -> None:
    """However small the drift (a few hundredths), eight batches' means would be correlated."""
    assert drift(16).batches() == [1.5, 5.5, 9.5, 13.5]
    assert drift(16, 1.0, 0.001).batches() == pytest.approx([1.0015, 1.0055, 1.0095, 1.0135])


def test_two_hundred_samples_are_fifty_blocks_of_four() -> None:
    """Blocks double at 64 samples and again at 128, then keep four samples each: 200 samples of
    a drift make five batches of ten blocks (40 samples)."""
    assert drift(200).batches() == [19.5, 59.5, 99.5, 139.5, 179.5]


def test_thirty_independent_samples_make_ten_batches_of_three() -> None:
    values = [float(v) for v in np.random.default_rng(2).integers(90, 111, 30)]
    acc = BatchMeans()
    for v in values:
        acc.add(v)
    assert acc.batches() == pytest.approx([sum(values[i : i + 3]) / 3 for i in range(0, 30, 3)])


def test_batch_means_correlated_exactly_at_the_limit_are_kept() -> None:
    """Ten batch means whose lag-1 correlation is 0.2 exactly (14 / 70): not more than the
    limit, so the ten batches stay."""
    deviations = [-3, 3, 3, 3, 2, -2, -2, 2, -3, -3]
    acc = BatchMeans()
    for d in deviations:
        acc.add(100.0 + d)
        acc.add(100.0 + d)
    assert acc.batches() == [100.0 + d for d in deviations]


def test_weighted_samples_in_a_block_still_filling_keep_their_weighted_mean() -> None:
    acc = BatchMeans()
    for _ in range(65):  # 32 blocks of two, and one of one sample still filling
        acc.add(10.0, 0.5)
    assert acc.batches() == [10.0] * 10 and acc.mean == 10.0


def test_the_confidence_asked_for_is_the_one_given() -> None:
    values = [float(v) for v in np.random.default_rng(2).integers(90, 111, 30)]
    e95, e90 = estimate(values), estimate(values, confidence=0.90)
    assert e95 is not None and e90 is not None and e95.half_width is not None and e90.half_width is not None
    assert e90.half_width == pytest.approx(exact_half_width(list(e90.batch_means), 0.90), rel=1e-4)
    assert e95.half_width == pytest.approx(exact_half_width(list(e95.batch_means), 0.95), rel=1e-4)


def _edge(side: str, lo: float, hi: float) -> Comparison:
    """The comparison whose ``side`` ("low" or "high") end is exactly 1.0: a new mean found by
    bisection (exp of a logarithm within 1e-16 of zero is 1.0)."""
    base = Estimate(100.0, 90.0, 110.0, 40, (90.0, 110.0, 95.0, 105.0))

    def against(m: float) -> Comparison:
        return compare(base, Estimate(m, m - 10, m + 10, 40, (m - 10, m + 10, m - 5, m + 5)))

    while (mid := (lo + hi) / 2) not in (lo, hi):
        if getattr(against(mid), side) < 1.0:
            lo = mid
        else:
            hi = mid
    return against(hi)


def test_an_interval_that_touches_no_change_gets_no_real_verdict() -> None:
    faster = _edge("low", 100.0, 300.0)  # +16%, its interval from exactly 1.0
    assert faster.low == 1.0 and faster.ratio > 1.15
    assert faster.verdict == Verdict.NO_CHANGE and not faster.verdict.real
    slower = _edge("high", 10.0, 100.0)  # -16%, its interval up to exactly 1.0
    assert slower.high == 1.0 and slower.ratio < 0.85
    assert slower.verdict == Verdict.NO_CHANGE and not slower.verdict.real
