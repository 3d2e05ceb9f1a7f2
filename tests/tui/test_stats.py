"""DashState: bounded series, segments, the before/after figures, joules per step."""

from __future__ import annotations

import pytest

from gpudash.core.protocol import Event, EventKind
from gpudash.core.running import Running
from gpudash.core.textfmt import fmt_num
from gpudash.tui.series import Series, downsample
from gpudash.tui.state import DashState
from tests.messages import present

from .fakes import gpu, run_segment, sample, started


def test_window_series_keeps_the_latest_points():
    s = Series(maxlen=10)
    for i in range(100):
        s.append(float(i), float(i))
    assert len(s) == 10 and s.first_t == 90.0 and s.last_t == 99.0
    s.append(100.0, None)  # not available: no point
    assert len(s) == 10


def test_whole_series_keeps_the_whole_run_at_falling_resolution():
    s = Series(maxlen=100, mode="whole")
    for i in range(10_000):
        s.append(float(i), 1.0)
    assert len(s) <= 100
    assert s.first_t == 0.0 and present(s.last_t) > 9_800


def test_downsample_averages_buckets():
    xs, ys = downsample([(float(i), float(i % 2)) for i in range(1000)], 100)
    assert len(xs) == 100 and all(y == pytest.approx(0.5) for y in ys)


def test_segment_means_and_change_against_the_previous_config():
    st = DashState()
    st.ingest(started())
    # the first sample after a change is warm-up (its interval straddles the rebuild): left out
    st.ingest_all([sample(1.25, 50.0), *run_segment(1.25, 11.0, 200.0)[1:]])
    st.ingest(Event(11.0, EventKind.CHANGED, "variant", "serial", "pipelined"))
    st.ingest_all(
        [
            sample(11.25, 10.0, variant="pipelined"),
            *[m for m in run_segment(11.25, 21.0, 220.0, variant="pipelined") if m][1:],
        ]
    )
    rows = {r.metric.key: r for r in st.stat_rows()}
    assert rows["steps_per_s"].mean == pytest.approx(220.0)
    assert rows["steps_per_s"].prev == pytest.approx(200.0)
    assert rows["steps_per_s"].change_pct == pytest.approx(10.0)
    assert rows["steps_per_s"].verdict == 1
    assert rows["step_ms_p50"].change_pct == pytest.approx((1000 / 220 - 5.0) / 5.0 * 100)
    assert rows["step_ms_p50"].verdict == 1  # lower is better
    assert present(st.current).key == ("encdec", "pipelined", 8, "none")
    assert present(st.previous).key == ("encdec", "serial", 8, "none")
    assert [m.label for m in st.markers] == ["serial→pipelined"]


def test_a_sample_with_a_new_config_starts_a_segment_even_without_an_event():
    st = DashState()
    st.ingest_all(run_segment(0.0, 5.0, 100.0))
    st.ingest_all(run_segment(5.0, 10.0, 60.0, batch=16))
    assert [s.key[2] for s in st.segments] == [8, 16]


def test_paused_time_is_left_out_of_the_means():
    st = DashState()
    st.ingest(started())
    st.ingest_all(run_segment(1.0, 6.0, 100.0))
    st.ingest(Event(6.0, EventKind.PAUSED))
    st.ingest_all([sample(t / 4, 0.001) for t in range(25, 40)])
    st.ingest(Event(10.0, EventKind.RESUMED))
    st.ingest_all([sample(10.25, 1.0), *run_segment(10.25, 15.0, 100.0)[1:]])
    assert present(st.current).mean("steps_per_s") == pytest.approx(100.0)
    assert st.status == "running"


def test_joules_per_step_from_the_energy_counter():
    st = DashState()
    st.ingest(started())
    # 300 W, 100 steps/s -> 3 J per step
    st.ingest_all(run_segment(1.0, 11.0, 100.0))
    assert present(st.current).joules_per_step == pytest.approx(3.0, rel=0.05)
    assert st.now("joules_per_step") == pytest.approx(3.0, rel=0.1)


def test_no_energy_no_joules():
    st = DashState()
    st.ingest_all([sample(t / 4, 100.0) for t in range(1, 20)])
    assert present(st.current).joules_per_step is None and st.now("joules_per_step") is None


def test_status_follows_the_events():
    st = DashState()
    assert st.status == "starting"
    st.ingest(Event(0.0, EventKind.STARTING))
    st.ingest(started())
    assert st.status == "running"
    st.ingest(Event(5.0, EventKind.CRASHED, message="killed by SIGKILL"))
    assert st.status == "crashed" and "SIGKILL" in st.status_message
    st.ingest(Event(6.0, EventKind.ERROR, "batch_size", "8", "0", "batch size must be at least 1"))
    assert st.last_error is not None


def test_time_range_is_shared_and_bounded():
    st = DashState(maxlen=20)
    st.ingest_all(run_segment(0.0, 50.0, 100.0))
    t0, t1 = st.time_range()
    assert t1 == 50.0
    assert t0 >= 50.0 - 20 * 0.25 - 1e-9  # samples every 0.25 s, 20 kept
    st.ingest(gpu(50.5))
    assert st.time_range()[1] == 50.5


def test_formatting():
    assert fmt_num(None) == "–" and fmt_num(1234.5) == "1234" and fmt_num(3.14159) == "3.14"
    assert fmt_num(123456) == "123k"


def test_a_change_inside_the_noise_is_not_coloured() -> None:
    """Two configurations at the same true rate with 10% noise per sample: the stats panel's
    change row gives no verdict of better or worse (the old panel coloured anything over 0.5%)."""
    import random

    from gpudash.core.protocol import Event, Sample

    rng = random.Random(7)
    st = DashState()
    st.ingest(Event(0.0, EventKind.STARTED, running=Running("encdec", "serial", 8)))
    steps, t = 0, 0.0
    for variant in ("serial", "pipelined"):
        if variant == "pipelined":
            st.ingest(Event(t, EventKind.CHANGED, "variant", "serial", "pipelined"))
        for _ in range(120):
            t += 0.25
            rate = 200.0 * (1 + rng.gauss(0, 0.10))
            steps += int(rate * 0.25)
            st.ingest(Sample(t, "encdec", variant, 8, steps, steps * 8, 0.25, rate, rate * 8, 5.0, 6.0, 0.0))
    row = {r.metric.key: r for r in st.stat_rows()}["steps_per_s"]
    assert row.change_pct is not None and row.change_pct != 0.0  # the means differ a little...
    assert row.verdict == 0 and not present(row.comparison).verdict.real  # ...and that is called noise
    assert present(row.estimate).has_interval and present(row.prev_estimate).has_interval


def test_an_hour_of_changes_keeps_a_bounded_history_and_still_compares_with_the_last_config():
    """A change a minute for an hour (the soak): the dashboard's memory of past configurations
    stays bounded, and the stats panel still compares the current one with the one before."""
    from gpudash.tui.state import MAX_SEGMENTS

    st = DashState()
    st.ingest(started())
    for minute in range(60):
        t = minute * 10.0
        batch = 16 if minute % 2 else 8
        st.ingest(Event(t, EventKind.CHANGED, "batch_size", str(24 - batch), str(batch)))
        st.ingest_all([m for m in run_segment(t + 0.25, t + 10.0, 100.0 + batch, batch=batch) if m])
    assert len(st.segments) == MAX_SEGMENTS
    rows = {r.metric.key: r for r in st.stat_rows()}
    assert present(st.current).key[2] == 16 and present(st.previous).key[2] == 8
    assert rows["steps_per_s"].mean == pytest.approx(116.0)
    assert rows["steps_per_s"].prev == pytest.approx(108.0)
