"""Profiler windows: the figures module on hand-made traces with known intervals, a real window
on the CPU (trace file, event, steps kept out of the samples, bounded files), and --record."""

from __future__ import annotations

import csv
import gzip
import json
from pathlib import Path

import pytest

from gpudash.core.protocol import Control, Event, EventKind, Sample, TraceWindow
from gpudash.core.trace_note import TraceNote
from gpudash.engine.intervals import covered_by_two_or_more, union
from gpudash.engine.loop import StepLoop
from gpudash.engine.measure_windows import MAX_TRACE_FILES
from gpudash.engine.trace_figures import figures
from tests.helpers import gpudash_in_bare_env as _gpudash
from tests.helpers import record_args, timing
from workloads.base import WorkloadOptions
from workloads.factory import build


def _kernel(start: float, dur: float, stream: int, name: str = "k", correlation: int | None = None) -> dict:
    args: dict = {"stream": stream}
    if correlation is not None:
        args["correlation"] = correlation
    return {"cat": "kernel", "name": name, "ts": start, "dur": dur, "args": args}


def test_two_streams_overlapping_half_their_busy_time() -> None:
    # stream 7 runs 0-400 µs, stream 8 runs 200-600 µs: busy 600, both at once 200 → a third;
    # the window lasts 1000 µs: 60% busy, 40% idle
    events = [_kernel(0, 400, 7, "train"), _kernel(200, 400, 8, "encode")]
    fig = figures(events, steps=2, wall_ms=1.0)
    assert fig.gpu_busy_pct == pytest.approx(60.0)
    assert fig.idle_pct == pytest.approx(40.0)
    assert fig.overlap_pct == pytest.approx(100 * 200 / 600)
    assert fig.stream_busy_pct == pytest.approx({7: 40.0, 8: 40.0})
    assert fig.stream_ms_per_step == pytest.approx({7: 0.2, 8: 0.2})
    assert fig.kernels_per_step == 1.0


def test_one_stream_with_gaps_has_no_overlap_and_its_gaps_are_idle() -> None:
    events = [_kernel(0, 100, 7), _kernel(300, 100, 7), _kernel(350, 100, 7), _kernel(900, 100, 7, "last")]
    fig = figures(events, steps=1, wall_ms=1.0)
    assert fig.gpu_busy_pct == pytest.approx(35.0)  # 0-100, 300-450, 900-1000
    assert fig.overlap_pct == 0.0
    assert fig.top_kernels[0] == ("k", pytest.approx(0.3))


def test_launch_delay_and_memcpy_share() -> None:
    events = [
        {"cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 0, "dur": 5, "args": {"correlation": 1}},
        {"cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 10, "dur": 5, "args": {"correlation": 2}},
        _kernel(20, 10, 7, correlation=1),
        _kernel(50, 10, 7, correlation=2),
        {"cat": "gpu_memcpy", "name": "Memcpy HtoD", "ts": 100, "dur": 100, "args": {"stream": 7}},
    ]
    fig = figures(events, steps=1, wall_ms=1.0)
    assert fig.launch_delay_us == pytest.approx(30.0)  # median of 20 and 40
    assert fig.memcpy_pct == pytest.approx(10.0)


def test_a_trace_without_device_activity_has_no_gpu_figures() -> None:
    fig = figures([{"cat": "cpu_op", "name": "aten::conv2d", "ts": 0, "dur": 10}], steps=3, wall_ms=2.0)
    assert not fig.has_gpu and "GPU figures need CUDA" in fig.summary()


def test_interval_helpers() -> None:
    assert union([(5, 6), (0, 2), (1, 3)]) == [(0, 3), (5, 6)]
    assert covered_by_two_or_more([[(0, 10)], [(5, 15)], [(8, 20)]]) == pytest.approx(10.0)  # 5-15


# -- a real window on the CPU --------------------------------------------------------------------
def _run_with_windows(trace_dir: Path, windows: int, steps: int = 3) -> list[object]:
    got: list[object] = []
    pending = [TraceWindow(steps) for _ in range(windows)]
    with build("sync_loss", "cpu", WorkloadOptions(variant="fixed", image_size=16)) as w:

        def controls(timeout: float) -> Control | None:
            return pending.pop() if pending and loop.steps_issued >= 2 else None

        loop = StepLoop(w, emit=got.append, controls=controls, sample_interval_s=0.05, trace_dir=str(trace_dir))
        loop.run(steps=10)
    return got


def test_a_window_writes_a_chrome_trace_and_an_event_and_its_steps_stay_out_of_the_samples(tmp_path: Path) -> None:
    msgs = _run_with_windows(tmp_path, windows=1)
    event = next(m for m in msgs if isinstance(m, Event) and m.kind == EventKind.MEASURED and m.what == "trace")
    note = event.data
    assert event.what == "trace" and isinstance(note, TraceNote) and note.steps == 3
    path = Path(note.path)
    assert path.parent == tmp_path and path.name.endswith(".json.gz") and "sync_loss-fixed-b4" in path.name
    with gzip.open(path, "rt") as f:
        assert json.load(f)["traceEvents"]
    assert "GPU figures need CUDA" in event.message
    samples = [m for m in msgs if isinstance(m, Sample)]
    after = [s for s in samples if s.time_s > event.time_s]
    assert after and after[0].time_s - after[0].interval_s >= event.time_s - 0.05  # the window is not in it
    # the window's 3 steps trained: they count in the run's total (and its limit of 10 steps),
    # but no sample's throughput includes them — nor the step whose activations were counted apart
    assert samples[-1].steps == 10
    assert round(sum(s.steps_per_s * s.interval_s for s in samples)) == 10 - 3 - 1


def test_traces_are_bounded_oldest_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import gpudash.engine.measure_windows

    monkeypatch.setattr(gpudash.engine.measure_windows, "MAX_TRACE_FILES", 2)
    msgs = _run_with_windows(tmp_path, windows=3, steps=1)
    paths = [
        m.data.path
        for m in msgs
        if isinstance(m, Event) and m.kind == EventKind.MEASURED and isinstance(m.data, TraceNote)
    ]
    assert len(paths) == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(Path(p).name for p in paths[1:])


def test_a_failing_window_is_one_message_and_the_run_goes_on(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    msgs = _run_with_windows(blocker, windows=1)
    error = next(m for m in msgs if isinstance(m, Event) and m.kind == EventKind.ERROR)
    assert error.what == "trace" and error.message.startswith("profiler window failed:")
    assert [m for m in msgs if isinstance(m, Sample)][-1].steps == 10


# -- --record ------------------------------------------------------------------------------------
def _windows_and_a_sample(csv_path: Path) -> tuple[int, int]:
    """Of the whole lines written to ``csv_path`` so far: its profiler windows' event rows, its samples."""
    text = csv_path.read_text() if csv_path.exists() else ""
    lines = text.splitlines()[: text.count("\n")]
    windows = sum(line.startswith("event,") and ",measured,trace," in line for line in lines)
    return windows, sum(line.startswith("sample,") for line in lines)


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``record run.csv --trace-every 2 --trace-steps 2`` (sync_loss on the CPU), ended by Ctrl-C once it
    holds a profiler window and a sample (not after a time that a loaded machine, whose windows run
    back to back, could fill with windows alone): its folder."""
    import signal
    import subprocess
    import time

    from tests.helpers import GPUDASH, ROOT, once_per_session

    def record() -> Path:
        tmp = tmp_path_factory.mktemp("traced")
        windows = ("--image-size", "16", "--trace-every", "2", "--trace-steps", "2", "-q")  # 2 steps every 2 s
        argv = [*GPUDASH, *record_args("run.csv", *windows)]
        env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
        proc = subprocess.Popen(argv, cwd=tmp, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 240
            while min(_windows_and_a_sample(tmp / "run.csv")) < 1 and proc.poll() is None:
                if time.monotonic() > deadline:
                    proc.kill()
                time.sleep(0.2)
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == 130, err  # a recording ended by Ctrl-C: the shell's status for it
        return tmp

    return once_per_session(tmp_path_factory, "test_traces-traced", record)  # its tests may run in two workers


@pytest.mark.slow
def test_record_takes_a_window_every_few_seconds_into_event_rows_and_a_traces_folder(traced: Path) -> None:
    with (traced / "run.csv").open() as f:
        rows = [r for r in csv.DictReader(f) if r["event_what"] == "trace"]
    assert rows and all(r["event_kind"] == "measured" for r in rows)
    files = list((traced / "run.traces").glob("*.json.gz"))
    assert len(files) == min(len(rows), MAX_TRACE_FILES)  # the oldest beyond the bound go


def test_trace_every_needs_record(tmp_path: Path) -> None:
    out = _gpudash("--trace-every", "5", cwd=tmp_path)
    assert out.returncode == 2 and "--trace-every only applies with --record" in out.stderr


@pytest.mark.slow
def test_sweep_trace_takes_a_window_after_each_measurement(tmp_path: Path) -> None:
    sweep = ["sweep", "-w", "sync_loss", "-v", "fixed", "-b", "4", *timing(repeats=2, seconds=0.5, warmup=0.25)]
    out = _gpudash(*sweep, "--trace", "2", "--out", "sw", "-q", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    traces = sorted((tmp_path / "sw" / "traces").glob("*sync_loss-fixed-b4.json.gz"))
    assert len(traces) == 2  # one per configuration x repeat
    with gzip.open(traces[0], "rt") as f:
        assert json.load(f)["traceEvents"]
    assert json.loads((tmp_path / "sw" / "sweep.json").read_text())["settings"]["trace_steps"] == 2


@pytest.mark.slow
def test_report_lists_a_recordings_profiler_windows(traced: Path, tmp_path: Path) -> None:
    report = _gpudash("report", str(traced / "run.csv"), "--out", str(tmp_path / "rep"), cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    text = (tmp_path / "rep" / "report.md").read_text()
    section = text.split("### Profiler windows", 1)[1]
    assert "sync_loss/fixed bs4" in section and "2 steps traced" in section and ".json.gz" in section


def test_each_stage_gets_the_gpu_time_of_the_kernels_it_launched_and_the_overlap_bound() -> None:
    def launch(ts: float, corr: int) -> dict:
        return {"cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": ts, "dur": 2, "args": {"correlation": corr}}

    def stage(name: str, ts: float, dur: float) -> dict:
        return {"cat": "user_annotation", "name": f"gpudash.stage.{name}", "ts": ts, "dur": dur}

    # two steps; in each the train stage launches a 300 µs kernel, the encode stage a 100 µs one
    events = [
        stage("train", 0, 20),
        launch(5, 1),
        stage("encode", 20, 20),
        launch(25, 2),
        stage("train", 500, 20),
        launch(505, 3),
        stage("encode", 520, 20),
        launch(525, 4),
        _kernel(30, 300, 7, correlation=1),
        _kernel(40, 100, 8, correlation=2),
        _kernel(530, 300, 7, correlation=3),
        _kernel(540, 100, 8, correlation=4),
    ]
    fig = figures(events, steps=2, wall_ms=1.0)
    assert fig.stage_ms_per_step == pytest.approx({"train": 0.3, "encode": 0.1})
    assert fig.overlap_bound == pytest.approx(1000 / 0.3)
    assert f"{fig.numbers()['overlap_bound_steps_per_s']:.4g}" == "3333"


def test_a_window_annotates_the_stages_only_while_it_runs(tmp_path: Path) -> None:
    with build("encdec", "cpu", WorkloadOptions(image_size=16)) as w:
        got: list[object] = []
        pending = [TraceWindow(2)]
        loop = StepLoop(
            w,
            emit=got.append,
            controls=lambda t: pending.pop() if pending else None,
            sample_interval_s=0.05,
            trace_dir=str(tmp_path),
        )
        loop.run(steps=4)
        assert w.annotate_stages is None
    path = next(m.data.path for m in got if isinstance(m, Event) and isinstance(m.data, TraceNote))
    with gzip.open(path, "rt") as f:
        names = {e.get("name") for e in json.load(f)["traceEvents"]}
    assert {"gpudash.stage.encode", "gpudash.stage.train"} <= names


def test_the_dashboards_trace_line_says_how_close_a_pipeline_runs_to_its_bound() -> None:
    from gpudash.tui.markers import trace_line

    e = Event(
        12.3,
        EventKind.MEASURED,
        "trace",
        data=TraceNote(
            "/x/gpudash-trace-1-t00012.30-encdec-pipelined-b16.json.gz",
            20,
            400.0,
            12.3,
            {
                "gpu_busy_pct": 97.1,
                "idle_pct": 2.9,
                "overlap_pct": 31,
                "kernels_per_step": 145,
                "pct_of_overlap_bound": 88.4,
            },
        ),
    )
    assert (
        trace_line(e) == "GPU busy 97%, idle 3%, overlap 31%, 145 kernels/step, at 88% of the overlap bound (t=12.3 s)"
    )
