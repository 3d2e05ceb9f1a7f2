"""One way to show an interval, colour only for a real change, like with like, and "too short"
saying what to do: the dashboard's change row, sweeps' tables and plots, record's progress."""

from __future__ import annotations

import math
import re

import pytest

pytest.importorskip("hypothesis", reason="hypothesis is a dev extra (pip install -e '.[dev]')")
from hypothesis import example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from gpudash.core.protocol import Event, EventKind
from gpudash.core.textfmt import fmt_num, plain, plain_pm
from gpudash.stats.batch_means import MIN_SAMPLES_FOR_INTERVAL
from gpudash.stats.comparison import Comparison, Verdict
from gpudash.stats.fmt import MINUS, fmt_change, fmt_ratio
from gpudash.tui.state import DashState
from gpudash.tui.stats_panel import change_cell, stats_table
from tests.tui.fakes import run_segment, sample, started

RATIO = re.compile(r"^(\d+\.\d+)× \[(\d+\.\d+)–(\d+\.\d+)\]$")
CHANGE = re.compile(rf"^([+{MINUS}]\d+(?:\.\d)?)% \(([+{MINUS}]\d+(?:\.\d)?) … ([+{MINUS}]\d+(?:\.\d)?)%\)$")


def _num(text: str) -> float:
    return float(text.replace(MINUS, "-"))


@given(ratio=st.floats(0.05, 20.0), below=st.floats(0.0, 0.9), above=st.floats(0.0, 5.0))
def test_a_ratio_prints_its_asymmetric_interval_as_its_two_ends_never_plus_minus(
    ratio: float, below: float, above: float
) -> None:
    low, high = ratio * (1 - below), ratio * (1 + above)
    c = Comparison(ratio, low, high, Verdict.NO_CHANGE)
    for text, pattern in ((fmt_ratio(c), RATIO), (fmt_change(c), CHANGE)):
        assert "±" not in text
        m = pattern.match(text)
        assert m, text
        shown, lo, hi = (_num(g) for g in m.groups())
        assert lo <= shown <= hi  # rounding to the same decimals keeps the order


def test_without_an_interval_a_ratio_says_no_ci() -> None:
    c = Comparison(2.07, None, None, Verdict.TOO_SHORT)
    assert fmt_ratio(c) == "2.07× (no CI)" and fmt_change(c) == "+107% (no CI)"
    assert fmt_change(Comparison(0.9, 0.8, 0.97, Verdict.SLOWER)) == f"{MINUS}10% ({MINUS}20 … {MINUS}3%)"


def _two_configs(prev: list[tuple[float, float]], cur: list[tuple[float, float]]) -> DashState:
    """A dashboard state: ``prev`` then ``cur`` as (steps/s, syncs/step) a sample, 0.25 s apart,
    a variant change between them."""
    state = DashState()
    state.ingest(started())
    t = 1.0
    for rate, syncs in prev:
        t += 0.25
        state.ingest(sample(t, rate, syncs=syncs))
    state.ingest(Event(t, EventKind.CHANGED, "variant", "serial", "pipelined"))
    for rate, syncs in cur:
        t += 0.25
        state.ingest(sample(t, rate, syncs=syncs, variant="pipelined"))
    return state


def _flat(rates: list[float]) -> list[tuple[float, float]]:
    return [(r, 0.0) for r in rates]


# steps/s anywhere; syncs/step all zero (the fixed loss), rare and large (a mean whose interval
# may reach below zero), or anything
_syncs = st.sampled_from([(0.0,), (0.0, 0.0, 0.0, 3.0), (0.0, 0.5, 1.0, 2.0, 4.0)])
samples = _syncs.flatmap(
    lambda choices: st.lists(st.tuples(st.floats(1.0, 1000.0), st.sampled_from(choices)), min_size=0, max_size=40)
)


@settings(max_examples=200, deadline=None)
@given(prev=samples, cur=samples)
# no syncs before, a few after whose interval reaches below zero: "no change", not a red "0→0.75"
@example(prev=[(100.0, 0.0)] * 12, cur=[(100.0, x) for x in (0, 0, 0, 3, 0, 0, 0, 0, 3, 0, 0)])
def test_no_colour_is_ever_shown_for_an_interval_that_covers_no_change(
    prev: list[tuple[float, float]], cur: list[tuple[float, float]]
) -> None:
    state = _two_configs(prev, cur)
    for row in state.stat_rows():
        cell = change_cell(row)
        if "green" not in str(cell.style) and "red" not in str(cell.style):
            continue
        c = row.comparison
        assert c is not None and c.verdict.real and "±" not in cell.plain
        if c.finite:
            assert c.low is not None and c.high is not None
            assert c.low > 1.0 or c.high < 1.0, (cell.plain, c)  # the ratio's interval excludes 1
        else:  # from or to zero: the other side's interval must exclude zero
            other = row.estimate if row.prev_estimate is not None and row.prev_estimate.mean <= 0 else row.prev_estimate
            assert other is not None and other.low is not None and other.low > 0, (cell.plain, other)


def test_a_change_of_workload_is_not_compared() -> None:
    state = DashState()
    state.ingest(started())
    state.ingest_all(run_segment(1.0, 11.0, 200.0))
    state.ingest(Event(11.0, EventKind.CHANGED, "workload", "encdec", "sync_loss"))
    state.ingest_all(run_segment(11.0, 21.0, 60.0, workload="sync_loss", variant="fixed"))
    table = stats_table(state)
    change = dict(table.rows)["change"]
    assert {c.plain for c in change} == {"–"} and not any("red" in str(c.style) for c in change)
    assert {r.incomparable for r in state.stat_rows()} == {"new workload"}
    assert "new workload: nothing to compare" in table.title.plain


def test_a_batch_size_change_compares_samples_per_second_and_says_so() -> None:
    state = DashState()
    state.ingest(started())
    state.ingest_all(run_segment(1.0, 11.0, 200.0))  # batch 8: 1600 samples/s
    state.ingest(Event(11.0, EventKind.CHANGED, "batch_size", "8", "16"))
    state.ingest_all(run_segment(11.0, 21.0, 110.0, batch=16))  # 1760 samples/s: +10%
    table = stats_table(state)
    change = dict(zip(table.headers, dict(table.rows)["change"], strict=True))
    assert change["steps/s"].plain == "–" and change["p50 ms"].plain == "–"
    rows = {r.metric.key: r for r in state.stat_rows()}
    assert rows["steps_per_s"].incomparable == "batch size changed" and rows["samples_per_s"].incomparable is None
    assert change["samples/s"].plain == "+10.0%" and "green" in str(change["samples/s"].style)
    assert "batch 8→16: compared by samples/s" in table.title.plain
    assert "samples/s +10.0% (" in table.title.plain  # the headline change, with its interval


def test_warm_up_and_too_short_say_how_long_not_a_percentage() -> None:
    state = _two_configs(_flat([100.0] * 20), _flat([150.0]))  # one sample: still in warm-up
    steps = next(r for r in state.stat_rows() if r.metric.key == "steps_per_s")
    assert change_cell(steps).plain.startswith("warm-up, needs ≈") and "%" not in change_cell(steps).plain
    state = _two_configs(_flat([100.0] * 20), _flat([150.0] * 7))  # past the warm-up, too few for an interval
    steps = next(r for r in state.stat_rows() if r.metric.key == "steps_per_s")
    assert steps.estimate is not None and not steps.estimate.has_interval
    left = MIN_SAMPLES_FOR_INTERVAL - steps.estimate.n_samples
    assert change_cell(steps).plain == f"needs ≈ {math.ceil(left * 0.25)} s more"


@pytest.mark.parametrize("rate, seconds, want", [(0.4, 3.0, 10), (100.0, 0.5, 1)])
def test_a_too_short_sweep_says_which_seconds_would_do(rate: float, seconds: float, want: int) -> None:
    from gpudash.stats.comparison import Estimate
    from gpudash.sweep.plan import Configuration
    from gpudash.sweep.results import ConfigSummary

    per_sample = max(0.25, 1 / rate)
    n = max(1, int(seconds / per_sample))
    s = ConfigSummary(
        Configuration("sync_loss", "fixed", "fixed", 2, 0),
        repeats=2,
        seconds=2 * n * per_sample,
        n_samples=2 * n,
        stats={"steps_per_s": Estimate(rate, None, None, 2 * n)},
    )
    assert s.seconds_for_interval == want
    assert s.too_short_advice() == f"too short: {fmt_num(rate)} steps/s, use --seconds ≥ {want}"


@pytest.mark.parametrize(
    ("mean", "half_width", "shown"),
    [
        (0.49963, 7e-5, "0.4996 ± 0.0001"),  # never 7e-05; the mean to four significant digits at most
        (502.2, 9.1, "502 ± 9"),
        (40760.0, 1523.0, "40,800 ± 1,500"),  # thousands separated, both to the hundreds
        (231.875, 3.2, "231.9 ± 3.2"),  # a half-width starting with 1 to 3.5 keeps two digits
        (12.0, 0.96, "12.0 ± 1.0"),
        (1.0, 0.0, "1.000 ± 0"),
    ],
)
def test_an_interval_is_plain_notation_at_the_precision_it_has(mean: float, half_width: float, shown: str) -> None:
    assert plain_pm(mean, half_width) == shown


def test_a_figure_is_plain_notation_with_four_significant_digits() -> None:
    assert [plain(v) for v in (40760.3, 0.49963, 502.2, 1234567.0, 0.0)] == [
        "40,760",
        "0.4996",
        "502.2",
        "1,235,000",
        "0",
    ]
    assert plain(None) == "–"
