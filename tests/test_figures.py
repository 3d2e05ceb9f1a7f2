"""One statistics engine: the dashboard's segments, the CSV's summary rows, sweeps and reports
take their figures from ``gpudash.stats.figures`` and agree on the same samples."""

from __future__ import annotations

import dataclasses

import pytest

from gpudash.core.metrics import FIGURE_KEYS, METRICS
from gpudash.core.protocol import GpuSample, Message, Sample
from gpudash.stats.energy import joules_per_step
from gpudash.stats.figures import Figures
from gpudash.stats.segments import SegmentTracker
from gpudash.sweep.plan import Configuration
from gpudash.sweep.results import RepeatResult, summarize
from tests.messages import gpu_samples_of, present, samples_of
from tests.tui.fakes import gpu, run_segment, sample, started

CONFIG = Configuration("encdec", "serial", "serial", 8, 0)


def test_the_figures_sweeps_and_reports_tabulate_come_from_the_metric_catalog() -> None:
    assert FIGURE_KEYS == tuple(m.key for m in METRICS if m.figure)
    assert all(next(m for m in METRICS if m.key == k).mean is not None for k in FIGURE_KEYS)


def test_joules_per_step_is_the_energy_over_the_steps_between_the_first_and_last_mark() -> None:
    f = Figures()
    f.add_gpu(gpu(0.0, energy=100.0))  # before any sample: no step count to join, no mark
    for i, (energy, steps) in enumerate([(200.0, 10), (260.0, 10), (290.0, 20), (500.0, 50), (650.0, 70)]):
        f.add_sample(sample(i + 1.0, 40.0, steps=steps))
        f.add_gpu(gpu(i + 1.0, energy=energy))
    assert f.mean("joules_per_step") == pytest.approx(joules_per_step(200.0, 10, 650.0, 70))


def test_a_counter_that_goes_back_starts_afresh_and_no_increment_spans_a_gap() -> None:
    f = Figures()
    for t, energy, steps in [(1, 100.0, 10), (2, 200.0, 20), (3, 5.0, 25), (4, 35.0, 35)]:
        f.add_sample(sample(float(t), 40.0, steps=steps))
        f.add_gpu(gpu(float(t), energy=energy))
    assert f.mean("joules_per_step") == pytest.approx((100.0 + 30.0) / 20)  # 10 J/step, then 3 J/step
    f.break_marks()
    f.add_sample(sample(10.0, 40.0, steps=1000))
    f.add_gpu(gpu(10.0, energy=10_000.0))  # a later window: its first mark joins nothing before the gap
    assert f.mean("joules_per_step") == pytest.approx(130.0 / 20)


def with_gpm_and_mfu(m: Message) -> Message:
    """A message of ``run_segment`` with the figures GPM and the FLOP count add (every figure of a sweep)."""
    if isinstance(m, GpuSample):
        return dataclasses.replace(m, sm_active_pct=70.0 + m.time_s % 3, tensor_active_pct=50.0, dram_active_pct=20.0)
    if isinstance(m, Sample):
        return dataclasses.replace(m, flops_per_step=1e12, tflops=m.steps_per_s, mfu_pct=m.steps_per_s / 10)
    return m


def test_a_sweep_and_the_dashboard_give_the_same_figures_for_the_same_window() -> None:
    window = [with_gpm_and_mfu(m) for m in run_segment(0.0, 12.0, 40.0) if m.time_s > 0]
    samples, ticks = tuple(samples_of(window)), tuple(gpu_samples_of(window))
    assert len(samples) + len(ticks) == len(window)
    (summary,) = summarize((CONFIG,), [RepeatResult(CONFIG, 1, samples, ticks)])

    tracker = SegmentTracker()
    tracker.on_event(started(0.0))
    direct = Figures()
    for m in window:
        if isinstance(m, Sample):
            tracker.on_sample(m)
        elif isinstance(m, GpuSample):
            tracker.on_gpu(m)
    seg = tracker.current
    assert seg is not None
    # the segment leaves its first second (SETTLE_S) out as warm-up; the same window without it, directly
    for m in window:
        if m.time_s >= 1.0 and isinstance(m, Sample):
            direct.add_sample(m)
        elif m.time_s >= 1.0 and isinstance(m, GpuSample):
            direct.add_gpu(m)
    for key in FIGURE_KEYS:
        assert seg.estimate(key) == direct.estimate(key), key
        assert summary.stats[key] is not None
    assert present(summary.stats["steps_per_s"]).mean == pytest.approx(40.0)
    assert present(summary.stats["joules_per_step"]).has_interval  # J/step now has an interval everywhere
