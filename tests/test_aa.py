"""A/A comparisons never claim a change (issue 43): a configuration measured in repeats gets an
interval that counts how its repeats differ, not only the batch means inside each, and a real
10% change is still called."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import t as student_t

from gpudash.core.protocol import Sample
from gpudash.stats.batch_means import BatchMeans, Stretches, estimate, estimate_over_stretches, pool_estimates
from gpudash.stats.comparison import Estimate, Verdict, compare, estimate_from_batches, t_quantile
from gpudash.sweep.plan import Configuration
from gpudash.sweep.results import RepeatResult, summarize

ROOT = Path(__file__).resolve().parent.parent
SAMPLES_PER_REPEAT = 40  # 10 s at 0.25 s
WITHIN = 0.003  # tight noise inside a repeat (0.3%)
RUN_TO_RUN = 0.02  # each repeat's own level: 2% from run to run (clocks, load, placement)


def _rates(rng: np.random.Generator, levels: list[float]) -> list[list[float]]:
    """Each repeat's samples: its level with ``WITHIN`` noise."""
    return [list(level * (1.0 + rng.normal(0.0, WITHIN, SAMPLES_PER_REPEAT))) for level in levels]


def _levels(rng: np.random.Generator, mean: float, repeats: int) -> list[float]:
    return list(mean * (1.0 + rng.normal(0.0, RUN_TO_RUN, repeats)))


def _new_and_old(repeats: list[list[float]]) -> tuple[Estimate, Estimate]:
    """The estimate over stretches (the fix) and the old one: every sample in one batch-means series."""
    stretches, concatenated = Stretches(), BatchMeans()
    for rates in repeats:
        stretches.new_stretch()
        for v in rates:
            stretches.add(v, 0.25)
            concatenated.add(v, 0.25)
    new, old = stretches.estimate(), concatenated.estimate()
    assert new is not None and old is not None
    return new, old


def _result(config: Configuration, repeat: int, rates: list[float], t0: float) -> RepeatResult:
    """A sweep's repeat of ``config`` with these samples, 0.25 s apart from ``t0``."""
    samples = tuple(
        Sample(
            t0 + 0.25 * (i + 1), "sync_loss", config.variant, 2, i + 1, 2 * (i + 1), 0.25, r, 2 * r, None, None, None
        )
        for i, r in enumerate(rates)
    )
    return RepeatResult(config, repeat, samples)


def test_the_issues_a_a_sweep_said_faster_from_three_tight_repeats_and_now_says_no_change() -> None:
    """The issue's case, through the sweep's own summary: the same configuration twice, each repeat
    tight (±0.3%) but at its own level (a 2% spread from repeat to repeat). The old interval, batch
    means over all the samples, called the second 2% faster; the repeats' means say no change."""
    a = Configuration("sync_loss", "fixed", "fixed", 2, 0)
    b = Configuration("sync_loss", "fixed", "fixed#2", 2, 1)
    rng = np.random.default_rng(43)
    a_rates, b_rates = _rates(rng, [98.5, 101.5, 100.0]), _rates(rng, [104.5, 100.5, 101.5])
    results = [
        _result(config, i + 1, rates[i], t0=100.0 * (2 * i + config.position))
        for i in range(3)
        for config, rates in ((a, a_rates), (b, b_rates))
    ]
    old = compare(_new_and_old(a_rates)[1], _new_and_old(b_rates)[1])
    assert old.verdict is Verdict.FASTER and old.low is not None and old.low > 1.0  # the false claim
    summary = summarize((a, b), results)[1]
    c = summary.comparison
    assert c is not None and c.low is not None and c.high is not None
    assert c.ratio == pytest.approx(old.ratio, rel=1e-9)  # the same ratio: only its interval changed
    assert c.low < 1.0 < c.high and c.verdict is Verdict.NO_CHANGE
    steps = summary.steps
    assert steps is not None and steps.batch_means == pytest.approx([104.5, 100.5, 101.5], rel=0.003)


def test_a_against_a_with_run_to_run_variation_claims_a_change_in_at_most_five_percent() -> None:
    """300 A/A sweeps of 3 repeats each side, 2% run-to-run, 0.3% within: the old interval claimed a
    change in more than one in ten; the interval over the repeats in at most 5%."""
    rng = np.random.default_rng(1)
    new_claims = old_claims = 0
    for _ in range(300):
        (a_new, a_old), (b_new, b_old) = (_new_and_old(_rates(rng, _levels(rng, 100.0, 3))) for _ in range(2))
        new_claims += compare(a_new, b_new).verdict.real
        old_claims += compare(a_old, b_old).verdict.real
    assert old_claims / 300 > 0.10
    assert new_claims / 300 <= 0.05


def test_a_real_ten_percent_change_is_still_called_from_three_repeats() -> None:
    """The power check: 10% faster under the same run-to-run variation, 3 repeats a side: faster in
    at least 90% of 300 sweeps, never slower."""
    rng = np.random.default_rng(2)
    verdicts = []
    for _ in range(300):
        base = _new_and_old(_rates(rng, _levels(rng, 100.0, 3)))[0]
        faster = _new_and_old(_rates(rng, _levels(rng, 110.0, 3)))[0]
        verdicts.append(compare(base, faster).verdict)
    assert verdicts.count(Verdict.FASTER) / 300 >= 0.90
    assert Verdict.SLOWER not in verdicts


def test_repeats_that_agree_keep_the_pooled_batch_means_and_their_degrees_of_freedom() -> None:
    """Repeats at one level (no run-to-run variation): the interval is the batch means', pooled over
    the repeats (no batch spans two), as narrow as their spread says; it covers the true mean."""
    rng = np.random.default_rng(3)
    new, _ = _new_and_old(_rates(rng, [100.0, 100.0, 100.0]))
    assert len(new.batch_means) >= 15  # 5 or 10 per repeat, not the 3 repeats' means
    assert new.low is not None and new.high is not None and new.low < 100.0 < new.high
    assert new.rel_half_width is not None and new.rel_half_width < 0.002


def test_one_stretch_is_estimated_as_before() -> None:
    """The dashboard's segments (one stretch each) get exactly the batch-means estimate they had."""
    rng = np.random.default_rng(4)
    values = list(100.0 * (1.0 + rng.normal(0.0, 0.05, 120)))
    one = Stretches()
    for v in values:
        one.add(v, 0.25)
    assert one.estimate() == estimate(values, [0.25] * len(values))
    assert one.mean == estimate(values, [0.25] * len(values)).mean  # type: ignore[union-attr]


def test_the_stretches_variance_travels_in_the_batch_means_a_csv_keeps() -> None:
    """When the repeats differ, ``batch_means`` are their (weighted) means, so ``compare`` and a
    ``sweep.csv`` read back get R − 1 degrees of freedom and the same half-width."""
    e = estimate_over_stretches([(100.0, 10.0, [100.0] * 5), (104.0, 10.0, [104.0] * 5), (99.0, 20.0, [99.0] * 10)], 60)
    assert e is not None and e.half_width is not None
    mean = (100.0 * 10 + 104.0 * 10 + 99.0 * 20) / 40
    assert e.mean == pytest.approx(mean)
    pseudo = [mean + 3 * w / 40 * (m - mean) for m, w in ((100.0, 10), (104.0, 10), (99.0, 20))]
    assert e.batch_means == pytest.approx(pseudo)
    assert sum(e.batch_means) / 3 == pytest.approx(mean)  # the pseudo-values average to the weighted mean
    assert e.half_width == pytest.approx(student_t.ppf(0.975, 2) * np.std(pseudo, ddof=1) / np.sqrt(3))


def test_too_few_samples_over_repeats_give_no_interval() -> None:
    e = estimate_over_stretches([(100.0, 1.0, [100.0]), (110.0, 1.0, [110.0])], 4)
    assert e is not None and not e.has_interval and e.mean == 105.0
    assert estimate_over_stretches([], 0) is None


def test_a_recordings_segments_of_one_configuration_pool_with_their_differences_counted() -> None:
    """``gpudash report`` pools a configuration's segments: two tight segments 4% apart give an
    interval that spans both levels' spread, not the batch means' ±0.1%."""
    tight = [estimate_from_batches([level * (1 + 0.001 * k) for k in (-1, 0, 1, 0, -1, 1)]) for level in (100, 104)]
    pooled = pool_estimates(tight)
    assert pooled is not None and pooled.low is not None and pooled.high is not None
    assert pooled.mean == pytest.approx(102.0)
    assert pooled.low < 100.0 and pooled.high > 104.0


@pytest.mark.parametrize("df", [1.0, 1.5, 2.0, 2.9])
@pytest.mark.parametrize("confidence", [0.90, 0.95, 0.99])
def test_the_t_quantile_below_three_degrees_of_freedom_is_exact(df: float, confidence: float) -> None:
    """Two or three repeats' means: the expansion would be 11% short at one degree of freedom."""
    assert t_quantile(confidence, df) == pytest.approx(student_t.ppf(0.5 + confidence / 2, df), rel=1e-9)


def _bench(command: str, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "benchmarks", command, "aa_false_claims", *args]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=240)


def test_the_benchmark_says_how_to_run_it_and_refuses_bad_input() -> None:
    assert "tiny: runs=1" in _bench("list").stdout
    bad = _bench("run", "-p", "runs=-1")
    assert bad.returncode == 2 and "runs" in bad.stderr.splitlines()[-1]
    nothing = _bench("run", "-p", "runs=0", "-p", "ab=")
    assert nothing.returncode == 2 and "nothing to run" in nothing.stderr.splitlines()[-1]


@pytest.mark.slow
def test_a_tiny_run_of_the_benchmark_counts_its_a_a_verdict(tmp_path_factory: pytest.TempPathFactory) -> None:
    from tests.test_benchmarks_tiny import tiny_run

    r = tiny_run("aa_false_claims", tmp_path_factory)  # its run with keep in its folder, made once a session
    assert r.code == 0, r.stderr
    assert "of 1 A/A runs" in r.stdout and "Clopper-Pearson" in r.stdout
    assert (r.out / "aa_false_claims.result.json").is_file()
    assert (r.out / "runs" / "aa01" / "sweep.csv").is_file()
