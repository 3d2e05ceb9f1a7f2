"""The tests' reader of gpudash's printed lines (``tests/printed.py``), against lines that gpudash's
own formatters write, with and without each part a loaded machine adds: a ``noisy:`` clause or
mark, too short for an interval, no interval, thousands separators."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from gpudash.core.protocol import Sample
from gpudash.recording.headless import HeadlessRecording, progress_line
from gpudash.report.command import fmt_comparison
from gpudash.stats.comparison import Comparison, Estimate, compare
from gpudash.stats.fmt import fmt_change, fmt_ratio
from gpudash.stats.noise_tally import MARK
from gpudash.stats.segments import Segment, SegmentTracker
from gpudash.sweep.plan import Configuration
from gpudash.sweep.report import summary_line
from gpudash.sweep.results import summarize
from gpudash.sweep.run import FamilyRun
from gpudash.tune.run import TuneRun
from tests import printed
from tests.test_csv_roundtrip import sample
from tests.test_sweep import repeat_result

HOST_LOAD = "host load: other processes kept 1.9 of 2 CPUs busy"
WOBBLE = [100.0 + (3.0 if i % 2 else -3.0) + 0.1 * (i % 5) for i in range(40)]


def tracked(values: list[float], *, noise: str = "", job: bool = False, scale: float = 1.0) -> Segment:
    """A segment of encdec/serial bs8 (or a job's) whose samples after warm-up are ``values`` × ``scale``."""
    tracker = SegmentTracker()
    for i, v in enumerate([90.0, *values]):
        s: Sample = sample(0.5 * (i + 1), v * scale, steps=int(0.5 * (i + 1) * 100))
        if job:
            s = dataclasses.replace(s, workload="job:train.py", train_s=0.5)
        tracker.on_sample(dataclasses.replace(s, noise=noise if i else ""))
    seg = tracker.current
    assert seg is not None
    return seg


# -- summary lines -------------------------------------------------------------------------------------
@pytest.mark.parametrize("noise", ["", HOST_LOAD])
@pytest.mark.parametrize("scale", [1.0, 100.0])  # 10,000 steps/s: thousands separated
def test_a_workloads_summary_line_reads_with_its_interval_samples_and_noise(noise: str, scale: float) -> None:
    seg = tracked(WOBBLE, noise=noise, scale=scale)
    e = seg.estimate("steps_per_s")
    assert e is not None and e.half_width is not None
    s = printed.summary("gpudash: " + seg.summary())
    assert s is not None, seg.summary()
    assert (s.label, s.metric, s.too_short, s.others) == ("encdec/serial bs8", "steps/s", False, ())
    assert s.figure.holds(e.mean) and s.figure.has_interval  # to the digits the interval has
    assert s.samples == e.n_samples and s.steps is None and s.warmup_steps is None
    assert s.noisy == ("noisy: 100% of samples (host load)" if noise else "")


@pytest.mark.parametrize("noise", ["", HOST_LOAD])
def test_a_summary_too_short_for_an_interval_or_with_no_samples_reads_so(noise: str) -> None:
    short = printed.summary(tracked([100.0], noise=noise).summary())
    assert short is not None and short.too_short and not short.figure.has_interval
    assert short.figure.mean == pytest.approx(100.0) and short.samples == 1
    assert bool(short.noisy) == bool(noise)
    none = printed.summary(tracked([]).summary())
    assert none is not None and none.figure.mean is None and none.samples is None


@pytest.mark.parametrize("noise", ["", HOST_LOAD])
def test_a_jobs_summary_line_reads_with_its_steps_and_warm_up(noise: str) -> None:
    seg = tracked(WOBBLE, noise=noise, job=True)
    line = seg.summary()
    s = printed.summary(line)
    assert s is not None, line
    assert s.label == "job:train.py/serial bs8" and s.steps == seg.counted_steps and s.warmup_steps == seg.warmup_steps
    assert s.figure.has_interval and not s.too_short and s.samples is None
    assert s.noisy.startswith("noisy: ") == bool(noise)
    few = printed.summary(tracked([100.0], noise=noise, job=True).summary())
    assert few is not None and few.too_short and few.steps is not None and few.warmup_steps is not None


def test_the_issues_loaded_summary_line_reads_and_an_unknown_clause_is_kept_not_refused() -> None:
    line = (
        "gpudash: job:between_steps.py bs16: steps/s 262 ± 17 (95% CI over 385 steps; warm-up: the first 15; "
        "noisy: 16% of samples (host load))"
    )
    s = printed.summary(line)
    assert s == printed.Summary(
        "job:between_steps.py bs16",
        "steps/s",
        printed.Figure(262.0, 17.0),
        steps=385,
        warmup_steps=15,
        noisy="noisy: 16% of samples (host load)",
    )
    more = printed.summary(line[:-1] + "; a clause of a later version)")
    assert more is not None and more.others == ("a clause of a later version",) and more.steps == 385
    assert printed.summary("gpudash: recording x to y.csv; GPU none") is None  # not a summary line
    assert printed.summaries(f"a\n{line}\nb") == [s]


# -- the progress line -----------------------------------------------------------------------------------
@pytest.mark.parametrize("noise", ["", HOST_LOAD + "; starved: the workload waited for a CPU 12% of the time"])
def test_the_progress_line_reads_with_its_figure_and_the_noise_now(noise: str) -> None:
    seg = tracked(WOBBLE, noise=noise)
    last = dataclasses.replace(sample(21.0, 101.0), noise=noise)
    p = printed.progress("gpudash: " + progress_line(last, seg, 100.0, 60.0))
    assert p is not None
    e = seg.estimate("steps_per_s")
    assert e is not None and p.figure is not None and p.figure.holds(e.mean)
    assert (p.now, p.label, p.samples, p.too_short) == (101.0, "encdec/serial bs8", e.n_samples, "")
    assert (p.elapsed_s, p.duration_s, p.noisy) == (100, 60, noise)


def test_the_progress_line_reads_while_warming_up_and_too_short() -> None:
    p = printed.progress(progress_line(None, None, 2.0))
    assert p == printed.Progress(None, None, None, None, None, "", 2, None, "")
    short = tracked([100.0])
    p = printed.progress(progress_line(sample(1.0, 100.0), short, 3725.0, None))
    assert p is not None and p.figure == printed.Figure(100.0) and p.too_short.startswith("needs")
    assert p.elapsed_s == 3725 and p.samples is None
    assert printed.progress("gpudash: done: 3 samples, 4 rows in x.csv") is None


# -- ratios, verdicts, changes ----------------------------------------------------------------------------
def comparison(ratio: float, wobble: float = 0.01) -> Comparison:
    """``ratio`` × 100 steps/s against 100, each over 5 batches that wobble by ``wobble``."""

    def estimate(mean: float) -> Estimate:
        batches = tuple(mean * (1 + wobble * k) for k in (-2, -1, 0, 1, 2))
        return Estimate(mean, mean * (1 - 2 * wobble), mean * (1 + 2 * wobble), 50, batches)

    return compare(estimate(100.0), estimate(100.0 * ratio))


@pytest.mark.parametrize(("ratio", "verdict"), [(1.5, "faster"), (0.6, "slower"), (1.0, "no change detected")])
@pytest.mark.parametrize("noisy", [False, True])
def test_a_comparison_reads_with_its_interval_verdict_and_noisy_mark(ratio: float, verdict: str, noisy: bool) -> None:
    c = comparison(ratio)
    cell = fmt_comparison(c) + (f" {MARK}" if noisy else "")
    got = printed.compared(cell)
    assert got is not None and got.verdict == verdict == str(c.verdict) and got.noisy == noisy
    assert got.ratio == pytest.approx(c.ratio, abs=0.01) and got.has_interval
    assert got.low == pytest.approx(c.low, abs=0.01) and got.high == pytest.approx(c.high, abs=0.01)
    sentence = printed.compared(f"samples/s {fmt_ratio(c)}, {verdict} ({MARK})")
    assert sentence is not None and sentence.metric == "samples/s" and sentence.verdict == verdict and sentence.noisy


def test_a_ratio_without_an_interval_and_a_verdict_cell_with_advice_read() -> None:
    c = compare(Estimate(100.0, None, None, 1), Estimate(120.0, 110.0, 130.0, 9))
    got = printed.compared(fmt_comparison(c))
    assert got is not None and not got.has_interval and got.verdict == "too short" and got.ratio == 1.2
    assert printed.verdict("too short: 0.40 steps/s, use --seconds ≥ 15 ⚠ noisy") == (
        "too short",
        "0.40 steps/s, use --seconds ≥ 15",
        True,
    )
    assert printed.verdict("(baseline)") == ("", "(baseline)", False)
    change = printed.change(fmt_change(comparison(1.08, 0.05)))
    assert change is not None and change.pct == pytest.approx(8.0) and change.low is not None and change.low < 8
    assert printed.change("−2.5% (no CI)") == printed.Change(-2.5, None, None)


@pytest.mark.parametrize("noisy", [False, True])
def test_report_s_line_per_pair_of_runs_reads_by_its_parts(tmp_path: Path, noisy: bool) -> None:
    from gpudash.report.ab import Pair
    from gpudash.report.load import ConfigFigures

    def run_of(name: str) -> Any:
        return SimpleNamespace(name=name)

    noise = "noisy: 20% of samples (host load)" if noisy else ""
    config = ConfigFigures(("encdec", "pipelined", 8, "none"), "pipelined", {}, 10, noise=noise)
    base = ConfigFigures(("encdec", "serial", 8, "none"), "serial", {}, 10)
    pair = Pair(run_of("b.csv"), config, run_of("a.csv"), base, comparison(1.09))
    got = printed.versus("gpudash: " + pair.sentence())
    assert got is not None, pair.sentence()
    assert (got.name, got.run, got.base, got.base_run) == (
        "encdec/pipelined bs8",
        "b.csv",
        "encdec/serial bs8",
        "a.csv",
    )
    assert got.compared.verdict == "faster" and got.compared.has_interval and got.compared.noisy == noisy


# -- a sweep's and tune's lines ----------------------------------------------------------------------------
@pytest.mark.parametrize("noise", ["", "noisy: 40% of samples (host load, starved)"])
def test_a_sweeps_configuration_line_reads_with_its_comparison_and_noise(noise: str) -> None:
    base, fixed = (
        Configuration("sync_loss", "sync-heavy", "sync-heavy", 4, 0),
        Configuration("sync_loss", "fixed", "fixed", 4, 1),
    )
    results = [repeat_result(base, 1, 50.0, 0.0), repeat_result(fixed, 1, 75.0, 10.0)]
    first, second = (dataclasses.replace(s, noise=noise) for s in summarize((base, fixed), results))
    line = printed.sweep_line("gpudash: " + summary_line(second))
    assert line is not None and line.name == fixed.name and line.unit == "steps/s" and line.base == base.label
    assert line.figure is not None and second.steps is not None and line.figure.holds(second.steps.mean)
    assert line.compared is not None and line.compared.verdict == "faster" and line.compared.ratio == pytest.approx(1.5)
    assert line.noisy == noise
    baseline = printed.sweep_line(summary_line(first))
    assert baseline is not None and baseline.compared is None and baseline.rest == "(baseline)"
    repeat = printed.sweep_line(FamilyRun.describe(SimpleNamespace(), results[1]))  # type: ignore[arg-type]
    assert repeat is not None and repeat.name == f"{fixed.name} repeat 1" and repeat.samples == 50
    assert repeat.seconds is not None and repeat.figure is not None and repeat.figure.holds(75.0)
    tune = SimpleNamespace(report=SimpleNamespace(stage_of={1: "knobs"}))
    told = printed.sweep_line(TuneRun.describe(tune, results[1]))  # type: ignore[arg-type]
    assert told is not None and told.name == "fixed b4 · knobs" and told.unit == "samples/s" and told.seconds
    assert printed.sweep_line("x repeat 2: failed: the workload crashed") == printed.SweepLine(
        "x repeat 2", None, "", failed="failed: the workload crashed"
    )


# -- record's last line and its events ----------------------------------------------------------------
def test_a_recordings_last_line_reads_with_its_counts(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    seg = tracked(WOBBLE, noise=HOST_LOAD)
    kinds = {"sample": 41, "event": 3, "summary": 1}
    recorder = SimpleNamespace(
        summaries=[seg.summary()], samples=41, rows=45, kinds=kinds, path=str(tmp_path / "r.csv")
    )
    session = SimpleNamespace(log_path=str(tmp_path / "r.log"))
    run = HeadlessRecording(None, session, lambda: recorder, path=tmp_path / "r.csv")  # type: ignore[arg-type,return-value]
    run.recorder = recorder  # type: ignore[assignment]
    run.report()
    err = capsys.readouterr().err
    done = printed.last_done(err)
    assert done == printed.Done("done", 41, 45, str(tmp_path / "r.csv")) and done.kinds == kinds, err
    (s,) = printed.summaries(err)
    assert s.noisy and s.samples == 40
    line = "gpudash: interrupted by SIGINT: 4 rows (3 throughput windows, 1 event)"
    assert printed.done_line(line) == printed.Done("interrupted by SIGINT", 3, 4, None)


def test_event_lines_read_by_their_kind() -> None:
    text = "\n".join(
        [
            "gpudash: [    2.0s] started: started encdec/serial",
            "gpudash: [   12.5s] changed variant: serial → pipelined",
            "gpudash: [  104.3s] measured: goodput 50.0% of 20.0 s: startup 5.3 s · training 10.0 s",
            "gpudash: [    3.0s] paused",
        ]
    )
    (measured,) = printed.event_lines(text, "measured")
    assert measured == printed.EventLine(104.3, "measured", "goodput 50.0% of 20.0 s: startup 5.3 s · training 10.0 s")
    assert [e.kind for e in printed.event_lines(text)] == ["started", "changed", "measured", "paused"]
    assert printed.event_lines(text, "changed")[0].text == "variant: serial → pipelined"


# -- figures and tables -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "mean", "half"),
    [
        ("502 ± 9", 502.0, 9.0),
        ("40,800 ± 1,500", 40800.0, 1500.0),
        ("0.4996 ± 0.0001", 0.4996, 0.0001),
        ("48.2 (no CI)", 48.2, None),
        ("12.5k (no CI)", 12500.0, None),
        ("502", 502.0, None),
        ("–", None, None),
    ],
)
def test_a_figure_reads_with_or_without_its_interval(text: str, mean: float | None, half: float | None) -> None:
    assert printed.figure(text) == printed.Figure(mean, half)


def test_a_markdown_tables_cells_read_under_their_heading() -> None:
    md = "# r\n\n## Run 1: a.csv\n\n| a | b |\n|---|---|\n| 1 ± 0.1 | x \\| y |\n| 2 | z |\n\nafter\n\n## Next\n| c |\n"
    assert printed.table_rows(md, "## Run 1: a.csv") == [["1 ± 0.1", "x | y"], ["2", "z"]]
    assert printed.table_rows(md) == [["1 ± 0.1", "x | y"], ["2", "z"]]


def test_the_straggler_verdicts_read_by_the_rank_they_name() -> None:
    from gpudash.ranks.own_work import RankWork, judge

    def verdict(*own_ms: float) -> str:
        made = judge([RankWork(rank, ms, 0.1, 1.0, 50) for rank, ms in enumerate(own_ms)], {1: 38.0})
        assert made is not None
        return made.words

    named = verdict(10.0, 20.0, 10.0)
    assert printed.stragglers(f"gpudash: [  3.0s] measured: world: 3 ranks; {named}") == [1]
    assert not printed.no_straggler(named)
    for even in (verdict(10.0, 10.1, 10.0), verdict(10.0, 10.2, 10.5, 10.0)):
        assert printed.no_straggler(even) and printed.stragglers(even) == [], even


def test_a_goodput_account_reads_by_its_phases() -> None:
    from gpudash.job.wall_time import phases_line

    line = phases_line({"training": 36.2, "evaluation": 9.8, "checkpoint": 0.01, "startup": 6.0}, 58.3, 62.1)
    assert printed.goodput(f"gpudash: [  58.3s] measured: {line}") == printed.Goodput(
        62.1, 58.3, {"training": 36.2, "evaluation": 9.8, "startup": 6.0}
    )
    assert printed.goodputs(phases_line({"training": 0.0}, 1.0, None)) == [
        printed.Goodput(None, 1.0, {"training": 0.0})
    ]
