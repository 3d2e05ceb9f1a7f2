"""A job's step records made into samples window by window (``gpudash.job.steps.JobSamples``), fed by
hand: a window counts only the steps of the windows closed, a window without a step reads the step
under way (nothing once it is late), a 10 s step reads 0.1 steps/s, a profiled step weighs nothing,
and without a DataLoader the batch and samples/s are unknown (the job itself: tests/test_job.py)."""

from __future__ import annotations

import pytest


def test_a_windows_totals_count_only_the_steps_inside_the_windows_closed() -> None:
    """Step records arrive ahead of the windows that hold them: a sample's cumulative steps and
    samples are those of the windows closed, never of records that arrived early; its rate is its
    timed steps over their training seconds."""
    from gpudash.job.step_record import StepRecord
    from gpudash.job.steps import LAG_S, JobSamples

    job = JobSamples("job:train.py", "", interval_s=0.25, t0=0.0)
    times = [0.0, 0.1, 0.2, 0.3, 0.6, 0.7]
    for i, t in enumerate(times, 1):
        job.add(0, StepRecord(i, t, 5.0, 8, 0, 0.0, None, False, t - times[i - 2] if i > 1 else None))
    first, second = job.due(0.5 + LAG_S)
    assert (first.steps, first.samples, first.steps_per_s, first.train_s) == (3, 24, pytest.approx(10.0), 0.2)
    assert (second.steps, second.samples) == (4, 32)
    (third,) = job.flush()  # the last window: steps 5 and 6, 0.3 s and 0.1 s
    assert (third.steps, third.samples, third.batch_size) == (6, 48, 8) and job.flush() == []
    assert third.steps_per_s == pytest.approx(5.0) and third.samples_per_s == pytest.approx(40.0)


def test_windows_without_a_step_read_the_step_under_way_then_nothing_once_it_is_late() -> None:
    from gpudash.job.step_record import StepRecord
    from gpudash.job.steps import HOLD_ZERO_S, LAG_S, JobSamples

    job = JobSamples("job:train.py", "", interval_s=0.25, t0=0.0)
    job.add(0, StepRecord(1, 0.0, 5.0, 8, 0, 0.0, None, False))
    job.add(0, StepRecord(2, 0.1, 5.0, 8, 0, 0.0, None, False, 0.1))
    assert [s.steps_per_s for s in job.due(1.0 + LAG_S)] == [10.0]  # late after 0.2 s: three empty windows held
    job.add(0, StepRecord(3, 1.1, 5.0, 8, 0, 0.0, None, False, 1.0))
    out = job.due(1.25 + LAG_S)
    assert [s.steps_per_s for s in out] == [0.0, 0.0, 0.0, 1.0]  # a pause: they go out, weighing nothing
    assert [s.train_s for s in out] == [0.0, 0.0, 0.0, 1.0]
    later = job.due(1.25 + HOLD_ZERO_S + LAG_S)  # the next step is under way: 1 s steps read 1.0, falling once late
    assert [s.steps_per_s for s in later[:3]] == [1.0, 1.0, 1.0] and all(s.train_s == 0.0 for s in later)
    assert later[4].steps_per_s == pytest.approx(1 / 1.4)  # the window that ends 1.4 s after the last step
    assert {s.steps_per_s for s in job.due(8.0)} == {0.0}  # 2 s late (twice its usual): nothing, held then out
    job.add(0, StepRecord(4, 6.0, 5.0, 8, 0, 0.0, None, False, 4.9))
    assert all(s.steps_per_s > 0 for s in job.flush()[-1:])


def test_a_10_s_step_reads_0_1_steps_per_s_in_every_window_from_its_second_step_on() -> None:
    from gpudash.job.step_record import StepRecord
    from gpudash.job.steps import LAG_S, JobSamples

    job = JobSamples("job:train.py", "", interval_s=0.25, t0=0.0)
    for i in range(1, 5):
        job.add(0, StepRecord(i, 10.0 * (i - 1), None, 8, 0, 0.0, None, False, 10.0 if i > 1 else None))
    rates = [s.steps_per_s for s in job.due(30.0 + LAG_S)]
    assert rates[0] == 0.0  # the first step's window: its own time is unknown, the job's start
    # the second step under way, before any step was timed: at most one over its seconds so far, falling
    assert rates[1:40] == pytest.approx([1 / (0.25 * (k + 1)) for k in range(1, 40)])
    assert rates[40:] == pytest.approx([0.1] * (len(rates) - 40))  # then 0.1 from its second step on, not 0, 0, 0.4
    weighed = [s.train_s for s in job.due(30.0 + LAG_S)]
    assert sum(s.train_s or 0.0 for s in job.flush()) + sum(w or 0.0 for w in weighed) >= 0.0


def test_a_window_with_a_profiled_step_is_shown_but_weighs_nothing() -> None:
    from gpudash.job.step_record import StepRecord
    from gpudash.job.steps import LAG_S, JobSamples

    job = JobSamples("job:train.py", "", interval_s=1.0, t0=0.0)
    job.add(0, StepRecord(1, 0.0, None, 8, 0, 0.0, None, False))
    for i in range(2, 30):
        profiled = 10 <= i < 20
        job.add(0, StepRecord(i, 0.1 * (i - 1), None, 8, 0, 0.0, None, profiled, 0.1 if not profiled else 0.2))
    out = job.due(3.0 + LAG_S)
    assert [s.train_s for s in out] == [0.0, 0.0, pytest.approx(0.9)]  # the first two hold profiled steps
    assert all(s.steps_per_s > 0 for s in out)


def test_without_a_dataloader_the_batch_and_samples_per_s_are_unknown_not_zero() -> None:
    from gpudash.job.step_record import StepRecord
    from gpudash.job.steps import LAG_S, JobSamples

    job = JobSamples("job:train.py", "", interval_s=0.25, t0=0.0)
    for i in range(1, 10):
        job.add(0, StepRecord(i, 0.1 * i, None, 0, 0, 0.0, None, False, 0.1 if i > 1 else None))
    out = job.due(1.0 + LAG_S)
    assert out and all(s.samples_per_s is None and s.batch_size == 0 for s in out)
    assert out[-1].steps_per_s == pytest.approx(10.0)
