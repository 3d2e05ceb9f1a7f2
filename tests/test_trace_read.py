"""A job's profiler window read within a memory bound, off the session's thread (issue 54, item 12):
a trace of steps of thousands of small operators is streamed, cut to the whole steps that fit, and
its figures per step are those of the whole trace; later windows ask for fewer steps."""

from __future__ import annotations

import gzip
import json
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from gpudash.engine.trace_figures import STEP_MARKER, figures, read_events
from gpudash.engine.trace_read import read_bounded, stream_events
from gpudash.job.traces import JobTraces


def _trace(path: Path, steps: int, kernels: int, *, gz: bool = False) -> Path:
    """A Chrome trace as torch's profiler writes it: host ops and launches first, then the GPU's
    kernels; each step a ``gpudash.step`` range of ``kernels`` launches of 2 µs kernels."""
    host: list[dict[str, Any]] = []
    device: list[dict[str, Any]] = []
    step_us = kernels * 5.0
    for s in range(steps):
        t0 = s * step_us
        host.append({"ph": "X", "cat": "user_annotation", "name": STEP_MARKER, "ts": t0, "dur": step_us - 1, "pid": 1})
        for k in range(kernels):
            c = s * kernels + k
            ts = t0 + 5.0 * k
            host.append({"ph": "X", "cat": "cpu_op", "name": "aten::add", "ts": ts, "dur": 3.0, "args": {"seq": c}})
            host.append(
                {
                    "ph": "X",
                    "cat": "cuda_runtime",
                    "name": "cudaLaunchKernel",
                    "ts": ts + 1,
                    "dur": 1.0,
                    "args": {"correlation": c},
                }
            )
            device.append(
                {
                    "ph": "X",
                    "cat": "kernel",
                    "name": "void at::native::vectorized_elementwise_kernel<4>",
                    "ts": ts + 3,
                    "dur": 2.0,
                    "args": {"correlation": c, "stream": 7, "grid": [1, 1, 1]},
                }
            )
    doc = {"schemaVersion": 1, "deviceProperties": [{"id": 0}], "traceEvents": host + device, "traceName": "x"}
    if gz:
        with gzip.open(path, "wt") as f:
            json.dump(doc, f)
    else:
        path.write_text(json.dumps(doc, indent=1))
    return path


@pytest.mark.parametrize("gz", [False, True])
def test_streamed_events_are_the_files_events(tmp_path: Path, gz: bool) -> None:
    path = _trace(tmp_path / ("t.json.gz" if gz else "t.json"), steps=3, kernels=40, gz=gz)
    assert list(stream_events(path)) == read_events(path)


@pytest.mark.parametrize("text", ["", "{}", '{"traceEvents": [{"a": 1}, {oops', '{"traceEvents": [{"a": 1}'])
def test_a_file_that_is_not_a_trace_is_a_value_error(tmp_path: Path, text: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(ValueError):
        list(stream_events(path))


def _peak_reading(path: Path, max_events: int) -> tuple[Any, int]:
    tracemalloc.start()
    try:
        trace = read_bounded(path, max_events=max_events)
        return trace, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.slow
def test_a_large_trace_is_cut_to_whole_steps_with_the_same_figures_per_step_in_bounded_memory(tmp_path: Path) -> None:
    """Four times the trace, the same memory: what is kept is bounded by events, not by the file."""
    small = _trace(tmp_path / "small.json", steps=5, kernels=800)
    large = _trace(tmp_path / "large.json", steps=20, kernels=800)
    _, small_peak = _peak_reading(small, 3200)
    trace, large_peak = _peak_reading(large, 3200)
    assert trace.steps_in_file == 20 and trace.cut_short and 1 <= trace.steps <= 2
    assert large_peak < 1.5 * small_peak, f"{large_peak:,} B vs {small_peak:,} B"
    whole = figures(read_events(large), 20, 20 * 4.0)
    part = figures(trace.events, trace.steps, trace.steps * 4.0)
    assert part.kernels_per_step == whole.kernels_per_step == 800
    assert part.gpu_ms_per_step == pytest.approx(whole.gpu_ms_per_step, rel=0.01)
    assert part.launch_delay_us == pytest.approx(whole.launch_delay_us)


def test_a_large_window_is_read_in_the_background_said_cut_short_and_later_windows_ask_fewer_steps(
    tmp_path: Path,
) -> None:
    traces = JobTraces(max_events=3000)
    request, note = traces.ask("trace", 10, str(tmp_path), "job", [0])
    assert request["steps"] == 10 and not note
    path = _trace(Path(request["dir"]) / f"{request['name']}-rank0.json", steps=10, kernels=600)
    traces.received({"k": "trace", "path": str(path), "steps": 10, "wall_ms": 150.0})
    deadline = time.monotonic() + 60
    while not (done := traces.done()):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    read = done[0]
    assert read.figures is not None and read.figures.kernels_per_step == 600
    assert "cut short to its first" in read.note and "of 10 steps" in read.note
    traces.step_cap = 2  # as a trace of 32 MB a step would set it
    request, note = traces.ask("trace", 10, str(tmp_path), "job", [0])
    assert request["steps"] == 2 and "2 steps, not 10" in note


def test_a_note_on_a_diagnosis_windows_trace_is_the_traces_never_the_diagnosis_answer(tmp_path: Path) -> None:
    """A window cut short during ``gpudash diagnose`` says so as a trace note: the diagnosis is not
    taken to have failed (it did, on two H200s, before this)."""
    from gpudash.core.protocol import DIAGNOSIS, Event, RunConfig
    from gpudash.job.session import JobSession
    from gpudash.job.traces import TraceRead

    session = JobSession(RunConfig(workload="job:x", job=("python", str(tmp_path / "x.py"))))
    try:
        session.windows.traced(
            TraceRead(DIAGNOSIS, "t.json", figures=figures([], 1, 1.0), note="cut short to its first 2")
        )
        events = [m for m in session.out.messages if isinstance(m, Event)]
        assert [e.what for e in events] == ["trace"] and "cut short" in events[0].message
    finally:
        session.channel.close()


def test_windows_asked_for_more_often_than_their_cost_allows_are_skipped_and_said_once_as_measured(
    tmp_path: Path,
) -> None:
    """``--trace-every`` faster than 3% of the job's time allows, the last window's cost known: the
    next periodic windows are skipped, and gpudash says why once — its own pacing, a measured fact,
    never an error of the job's."""
    from gpudash.core.protocol import WINDOWS_PACED, Event, EventKind, RunConfig
    from gpudash.job.session import JobSession

    session = JobSession(RunConfig(workload="job:x", job=("python", str(tmp_path / "x.py"))))
    try:
        traces = session.parts.traces
        traces.cost_s, traces.ended_at = 0.27, time.monotonic()  # a window just cost the job 0.27 s
        assert "one every 9.0 s at most" in traces.spaced(time.monotonic() + 1.0)
        assert traces.spaced(time.monotonic() + 9.5) == ""  # 9 s later: 3% of the time since
        for _ in range(3):
            session.windows.periodic(5)
        events = [m for m in session.out.messages if isinstance(m, Event)]
        assert [(e.kind, e.what) for e in events] == [(EventKind.MEASURED, WINDOWS_PACED)]
        assert "profiler windows cost this job about 0.27 s each" in events[0].message
        assert not traces.periodic_open  # none asked of the job
    finally:
        session.channel.close()


def test_a_diagnosis_whose_window_cannot_be_read_still_gives_the_untraced_steps_verdict(tmp_path: Path) -> None:
    """A trace that cannot be read (a full disk, a killed write): the error said, and the verdict of
    what was measured — the untraced window's steps — still given (the CPU had one before its
    diagnosis took a window there)."""
    from gpudash.core.protocol import DIAGNOSIS, Event, EventKind, RunConfig
    from gpudash.diagnosis.evidence import Evidence
    from gpudash.job.diagnosis_window import JobDiagnosis
    from gpudash.job.session import JobSession
    from gpudash.job.traces import TraceRead

    session = JobSession(RunConfig(workload="job:x", job=("python", str(tmp_path / "x.py"))))
    try:
        session.windows.diagnosis = JobDiagnosis(30, time.monotonic(), phase="traced")
        session.windows.diagnosis.timed_evidence = Evidence(steps=30, step_ms=12.0, input_ms=0.1)
        session.windows.traced(TraceRead(DIAGNOSIS, "t.json", error="cannot read the profiler window's trace"))
        given = session.ticks.through(session.out.take(), None)  # as its poll gives them: judged
        events = [m for m in given if isinstance(m, Event)]
        assert [(e.kind, e.what) for e in events] == [(EventKind.ERROR, DIAGNOSIS), (EventKind.MEASURED, DIAGNOSIS)]
        assert events[1].message.startswith("CPU-bound: the step's own work on the CPU, 12 ms a step")
        assert session.windows.diagnosis is None  # answered
    finally:
        session.channel.close()
