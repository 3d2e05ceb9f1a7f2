"""CUDA step timing in groups: the timer's arithmetic, with CUDA events faked at torch's boundary
(the real events are timed by ``tests/test_engine_gpu.py``)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from gpudash.engine.measure import CudaStepTimer


class _GpuClock:
    """A fake GPU: each event completes when the host says the GPU got that far (``now_ms``)."""

    def __init__(self) -> None:
        self.issued_ms = 0.0  # when the GPU will have finished what was issued so far
        self.now_ms = 0.0


class _Event:
    def __init__(self, gpu: _GpuClock, enable_timing: bool = False) -> None:
        self.gpu = gpu
        self.at: float | None = None

    def record(self, stream: object = None) -> None:
        self.at = self.gpu.issued_ms

    def query(self) -> bool:
        return self.at is not None and self.at <= self.gpu.now_ms

    def elapsed_time(self, end: _Event) -> float:
        assert self.at is not None and end.at is not None  # the timer only asks about completed events
        assert self.query() and end.query()
        return end.at - self.at


def _fake_torch(gpu: _GpuClock) -> object:
    """What the timer reads of torch: ``cuda.Event`` and ``cuda.current_stream``."""
    return SimpleNamespace(
        cuda=SimpleNamespace(Event=lambda enable_timing=False: _Event(gpu, enable_timing), current_stream=lambda: None)
    )


@pytest.mark.parametrize(("step_ms", "group"), [(1.0, 25), (0.05, 256), (25.0, 1)])
def test_fast_steps_are_timed_in_groups_and_every_step_is_counted(step_ms: float, group: int) -> None:
    """A 1 ms step gets one event per 25 steps (recording one costs tens of µs on an H100), each step
    of a group its mean time; a 25 ms step is timed alone; no step is lost, even at a reset."""
    gpu = _GpuClock()
    timer = CudaStepTimer(_fake_torch(gpu))
    times: list[float | None] = []
    for _ in range(1000):
        timer.begin()
        gpu.issued_ms += step_ms
        timer.end()
        gpu.now_ms = gpu.issued_ms - 3 * step_ms  # the GPU runs three steps behind the host
        times += timer.poll()
    assert timer.group == group
    gpu.now_ms = gpu.issued_ms  # the drain
    times += timer.reset()
    assert len(times) == 1000 and timer.group == 1
    timed = [t for t in times if t is not None]
    assert times[0] is None and len(timed) > 1000 - group - 2  # unknown: the first, and after the last event
    assert all(t == pytest.approx(step_ms) for t in timed)


def test_a_reset_that_keeps_the_pace_goes_on_in_groups_and_one_after_a_change_starts_at_one() -> None:
    """A later ``run()`` of the same configuration issues its steps in groups at once (its first
    steps one at a time, each with its event, would cost a launch-bound step ~1%); after a change
    the group is one step until a step of the new configuration is timed."""
    gpu = _GpuClock()
    timer = CudaStepTimer(_fake_torch(gpu))
    for _ in range(100):
        gpu.issued_ms += 1.0
        timer.end()
        gpu.now_ms = gpu.issued_ms
        timer.poll()
    assert timer.group == 25
    timer.reset(keep_pace=True)
    assert timer.group == 25 and timer.burst() == 25
    timer.reset()
    assert timer.group == 1 and timer.burst() == 1
