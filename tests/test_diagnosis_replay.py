"""The diagnosis replays real profiler windows recorded on an H100 (torch 2.11, 2026-11-25, by
``python -m benchmarks run diagnosis_cases -p trace_out=DIR``, trimmed to the events the figures read):

- ``h100-encdec-pipelined-b8``: encdec pipelined at batch 8, no knobs — host/launch-bound, the case
  the diagnosis once read as ``GPU-bound (compute): kernels ran 100%`` (the traced kernels' time over an
  untraced step's wall, clipped to 100);
- ``h100-encdec-serial-b32-best``: encdec serial at batch 32 with bf16, channels_last, cudnn_benchmark
  and cuda_graph — GPU-bound.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from gpudash.diagnosis.evidence import Evidence
from gpudash.diagnosis.rules import diagnose
from gpudash.diagnosis.verdict import Bound
from gpudash.engine.trace_figures import TraceFigures, figures

DATA = Path(__file__).parent / "data" / "diagnosis"


def _window(name: str) -> tuple[TraceFigures, dict[str, Any]]:
    with gzip.open(DATA / f"{name}.json.gz", "rt", encoding="utf-8") as f:
        trace = json.load(f)
    return figures(trace["traceEvents"], trace["steps"], trace["wall_ms"]), trace


def _evidence(fig: TraceFigures, step_ms: float) -> Evidence:
    """As the diagnosis window builds it: the untraced step's wall beside the traced window's figures."""
    return Evidence(
        steps=fig.steps,
        step_ms=step_ms,
        input_ms=0.0,
        syncs_per_step=0.0,
        gpu_busy_pct=fig.gpu_busy_pct,
        gpu_ms_per_step=fig.gpu_ms_per_step,
        host_ms_per_step=fig.host_ms_per_step,
        launch_delay_us=fig.launch_delay_us,
    )


def test_a_host_bound_window_reads_idle_from_its_own_span() -> None:
    fig, _ = _window("h100-encdec-pipelined-b8")
    assert fig.gpu_busy_pct is not None and fig.gpu_ms_per_step is not None and fig.host_ms_per_step is not None
    assert fig.span_ms is not None and fig.gpu_ms_per_step * fig.steps <= fig.span_ms  # busy within the span
    assert fig.gpu_busy_pct < 75.0  # the GPU idles: 62% busy in this window, 35-50% in the diagnosis runs
    assert fig.host_ms_per_step > 1.5 * fig.gpu_ms_per_step  # the host enqueues slower than the GPU runs
    assert fig.launch_delay_us is not None and fig.launch_delay_us < 100.0  # nothing waits in the GPU's queue


@pytest.mark.parametrize("untraced_step_ms", [8.0, 3.0, 1.0])
def test_the_host_bound_case_is_host_bound_whatever_the_untraced_step(untraced_step_ms: float) -> None:
    """The failing evidence: its kernels ran 3.7 ms a step; over an untraced step of 3 ms (or 1) the
    old ratio read over 100% and was clipped to "kernels ran 100%". The window's own span says 35-50%."""
    fig, _ = _window("h100-encdec-pipelined-b8")
    verdict = diagnose(_evidence(fig, untraced_step_ms))
    assert verdict.bound == Bound.HOST, verdict.line()
    assert "µs after its launch" in verdict.why
    assert "100%" not in verdict.why


def test_a_graphed_gpu_bound_window_reads_busy_with_a_full_queue() -> None:
    fig, _ = _window("h100-encdec-serial-b32-best")
    assert fig.gpu_busy_pct is not None and 90.0 <= fig.gpu_busy_pct <= 100.0
    assert fig.host_ms_per_step is not None and fig.gpu_ms_per_step is not None
    assert fig.host_ms_per_step < fig.gpu_ms_per_step  # one graph launch a step: the host runs ahead
    assert fig.launch_delay_us is not None and fig.launch_delay_us > 1000.0  # launched graphs wait in the queue
    verdict = diagnose(_evidence(fig, step_ms=4.3))
    assert verdict.bound == Bound.GPU_COMPUTE, verdict.line()
    assert "in the GPU's queue" in verdict.why


def test_busy_never_exceeds_the_span_even_when_kernels_overlap_on_streams() -> None:
    """Two streams' kernels over one another, a step marker shorter than the GPU's backlog."""
    events: list[dict[str, Any]] = [
        {"cat": "user_annotation", "name": "gpudash.step", "ts": 0.0, "dur": 100.0},
        {"cat": "kernel", "name": "a", "ts": 50.0, "dur": 400.0, "args": {"stream": 7}},
        {"cat": "kernel", "name": "b", "ts": 60.0, "dur": 500.0, "args": {"stream": 13}},
        {"cat": "kernel", "name": "early", "ts": -300.0, "dur": 100.0, "args": {"stream": 7}},  # before the window
    ]
    fig = figures(events, steps=1, wall_ms=5.0)
    assert fig.span_ms == pytest.approx(0.56)  # 0 → 560 µs, the last kernel's end
    assert fig.gpu_busy_pct == pytest.approx(100.0 * 510.0 / 560.0)  # 50 → 560 busy; the early kernel is outside
    assert fig.gpu_ms_per_step == pytest.approx(0.51)


def test_a_queue_with_gaps_is_gpu_bound_an_empty_one_with_the_same_gaps_is_not() -> None:
    """80% busy: kernels waiting 5 ms in the queue mean the host is ahead (GPU-bound, the gaps are the
    GPU's own); kernels starting 10 µs after launch mean the GPU waited for the host."""
    queued = Evidence(30, step_ms=5.0, input_ms=0.0, syncs_per_step=0.0, gpu_busy_pct=80.0, launch_delay_us=5000.0)
    empty = Evidence(30, step_ms=5.0, input_ms=0.0, syncs_per_step=0.0, gpu_busy_pct=80.0, launch_delay_us=10.0)
    assert diagnose(queued).bound == Bound.GPU_COMPUTE
    assert diagnose(empty).bound == Bound.HOST
    assert diagnose(Evidence(30, 5.0, 0.0, 0.0, gpu_busy_pct=60.0, launch_delay_us=5000.0)).bound == Bound.HOST
