"""``gpudash.track()``: a user's own loop recorded in gpudash's CSV, read back by the replay and
report readers (errors inside the tracker, one line on stderr while the loop goes on:
tests/test_track_errors.py); the ranks of a data-parallel job. The script around it (exit, Ctrl-C,
kill, ``replay --follow``): tests/test_track_script.py.

CPU only (the wall clock times the steps); NVML is faked at the ``pynvml`` boundary
(tests/fake_gpus.py). tests/test_track_gpu.py holds the CUDA checks."""

from __future__ import annotations

import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import gpudash
from gpudash.cli.main import main
from gpudash.core.protocol import Event, EventKind, GpuSample, Sample
from gpudash.core.running import Running
from gpudash.engine.measure import percentile
from gpudash.recording.csvread import read_table
from gpudash.recording.replay import ReplaySource, read_all
from gpudash.recording.sidecar import read_sidecar
from gpudash.report.load import load_run
from gpudash.tracking.timing import Done, Mark, Note, StepStamps, weighted_percentile
from tests import printed
from tests.fake_gpus import GPU_IS_LOST, fake_gpus
from tests.helpers import ROOT

EXAMPLE = ROOT / "examples" / "track_loop.py"
WARNING = "gpudash.track: warning:"


def train_steps(tracker: gpudash.Tracker, steps: int, step_ms: float) -> None:
    """``steps`` steps of ``step_ms`` each at least (a sleep stands in for the work): a count, so a
    loaded machine makes the stretch longer, never emptier."""
    for _ in range(steps):
        time.sleep(step_ms / 1000)
        tracker.step(samples=8)


def train(tracker: gpudash.Tracker, seconds: float, step_ms: float, samples: int | None = 8) -> int:
    """A loop of steps that take ``step_ms`` each (a sleep stands in for the work); its step count."""
    n, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(step_ms / 1000)
        tracker.step(samples=samples)
        n += 1
    return n


def messages(path: Path) -> list:
    return read_all(ReplaySource(path))


def events(msgs: list) -> list[Event]:
    return [m for m in msgs if isinstance(m, Event)]


def samples(msgs: list) -> list[Sample]:
    return [m for m in msgs if isinstance(m, Sample)]


def whole(path: Path) -> list[list[str]]:
    """The file's rows, read strictly (``read_table`` refuses a cut line or a short row)."""
    _, rows = read_table(path)
    return [cells for _, cells in rows]


# -- what the file holds ----------------------------------------------------------------------------------


def test_a_tracked_loop_replays_with_its_samples_marks_and_end(tmp_path):
    path = tmp_path / "run.csv"
    with gpudash.track(path, label="resnet-ft", interval_s=0.05) as tracker:
        before = train(tracker, 0.6, 2.0)
        tracker.mark("lr drop")
        after = train(tracker, 0.6, 2.0)
    msgs = messages(path)
    ev = events(msgs)
    assert [e.kind for e in ev] == ["starting", "started", "changed", "stopped"]
    assert ev[1].running == Running("resnet-ft", "start", 8, device="cpu")  # read back typed, as it was written
    assert (ev[2].what, ev[2].before, ev[2].after) == ("mark", "start", "lr drop")
    assert ev[3].message == f"stopped tracking after {before + after} steps"
    ss = samples(msgs)
    assert {s.workload for s in ss} == {"resnet-ft"} and {s.batch_size for s in ss} == {8}
    assert [s.variant for s in ss] == sorted((s.variant for s in ss), key=["start", "lr drop"].index)
    assert ss[-1].steps == before + after and ss[-1].samples == 8 * (before + after)  # every step counted
    stretch = [s for s in ss if s.variant == "start"]
    assert stretch[-1].steps == before  # the mark splits the steps where it was made
    timed = [s.step_ms_p50 for s in ss if s.step_ms_p50 is not None]
    assert len(timed) >= 5 and 2.0 <= percentile(sorted(timed), 50) < 30.0  # a 2 ms sleep and the loop
    assert all(s.syncs_per_step is None and s.world_size == 1 for s in ss)
    assert not any(isinstance(m, GpuSample) for m in msgs)  # no NVML on this machine: no GPU columns
    src = ReplaySource(path)
    read_all(src)
    assert src.bad_rows == 0 and src.info.notes == ()  # the metadata passes replay's checks
    meta = read_sidecar(path)
    assert meta.problem is None and meta.data["recorded_by"] == "gpudash.track"
    assert meta.data["label"] == "resnet-ft" and meta.data["device"] == "cpu" and meta.data["steps"] == before + after


def two_stretches(path: Path, mark: str, seconds: float, step_ms: tuple[float, float]) -> None:
    """Track "mlp" into ``path``: ``seconds`` of steps of ``step_ms[0]`` ms, the mark, ``seconds`` more of
    ``step_ms[1]`` ms (each stretch as many steps as fill ``seconds``, or more on a loaded machine)."""
    with gpudash.track(path, label="mlp", interval_s=0.05) as tracker:
        train_steps(tracker, round(seconds * 1000 / step_ms[0]), step_ms[0])
        tracker.mark(mark)
        train_steps(tracker, round(seconds * 1000 / step_ms[1]), step_ms[1])


def test_the_report_reads_the_stretches_between_marks(tmp_path):
    path = tmp_path / "run.csv"
    two_stretches(path, "unfrozen", 0.5, (2.0, 2.0))
    run = load_run(path)
    assert [c.key for c in run.configs] == [("mlp", "start", 8, "none"), ("mlp", "unfrozen", 8, "none")]
    assert run.timeline is not None and [m.text for m in run.timeline.markers] == ["mark: start → unfrozen"]
    summaries = [cells for cells in whole(path) if cells[0] == "summary"]
    assert [s[3] for s in summaries] == ["start", "unfrozen"]  # the CSV carries each stretch's statistics


@pytest.mark.slow
def test_a_slower_stretch_after_a_mark_gets_an_interval_and_a_verdict(tmp_path):
    path = tmp_path / "run.csv"
    # 1 s to settle, then samples of 0.05 s; steps 6× apart: a load that lengthens each sleep leaves it slower
    two_stretches(path, "bigger model", 1.8, (2.0, 12.0))
    out = tmp_path / "report"
    assert main(["report", str(path), "--out", str(out)]) == 0
    first, second = load_run(path).configs
    a, b = first.stats["steps_per_s"], second.stats["steps_per_s"]
    assert a is not None and b is not None and a.has_interval and b.has_interval
    assert b.mean < 0.7 * a.mean
    (_, change) = [
        printed.compared(row[-1]) for row in printed.table_rows((out / "report.md").read_text(), "## Run 1:")
    ]
    assert change is not None and change.verdict == "slower", change  # (with "⚠ noisy" on a loaded machine or not)


def test_a_mark_before_the_first_step_names_the_first_stretch(tmp_path):
    path = tmp_path / "run.csv"
    with gpudash.track(path, label="ft", interval_s=0.05) as tracker:
        tracker.mark("warm-up")
        train(tracker, 0.3, 2.0)
    msgs = messages(path)
    assert [e.kind for e in events(msgs)] == ["starting", "started", "stopped"]
    assert {s.variant for s in samples(msgs)} == {"warm-up"}


def test_steps_without_samples_count_the_batch_size_given(tmp_path):
    path = tmp_path / "run.csv"
    with gpudash.track(path, batch_size=32, interval_s=0.05) as tracker:
        n = train(tracker, 0.3, 1.0, samples=None)
    last = samples(messages(path))[-1]
    assert (last.workload, last.batch_size, last.steps, last.samples) == ("train", 32, n, 32 * n)


def test_fast_steps_are_timed_in_groups_and_all_counted(tmp_path):
    path = tmp_path / "run.csv"
    with gpudash.track(path, interval_s=0.05) as tracker:
        for _ in range(50_000):  # microseconds each: groups of up to 64 steps a stamp
            tracker.step(samples=1)
    ss = samples(messages(path))
    assert ss[-1].steps == 50_000 and ss[-1].samples == 50_000
    assert tracker._stamps.group > 1  # the steps were grouped
    assert all(s.step_ms_p50 is None or s.step_ms_p50 < 1.0 for s in ss)


def test_the_writer_looks_at_the_steps_once_a_sample_and_counts_every_one(tmp_path, monkeypatch):
    """Each look at the stamps is CUDA calls in the training process: once the first step is in,
    the writer thread wakes once per sample interval, not every few ms (a mark wakes it at once)."""
    path = tmp_path / "run.csv"
    with gpudash.track(path, interval_s=0.5) as tracker:
        looks: list[float] = []
        collect = tracker._stamps.collect

        def looked() -> list[Done | Mark | Note]:
            looks.append(time.monotonic())
            return collect()

        monkeypatch.setattr(tracker._stamps, "collect", looked)
        n = train(tracker, 1.6, 1.0)
        tracker.mark("after")
        n += train(tracker, 0.2, 1.0)
    assert len(looks) <= 8  # the first step, ~4 samples in 1.8 s, the mark, the close (every 50 ms: ~36)
    last = samples(messages(path))[-1]
    assert last.steps == n
    assert [e.after for e in events(messages(path)) if e.kind is EventKind.CHANGED] == ["after"]


class _LaggingStamps(StepStamps):
    """Stamps that complete 30 ms after they are made: a GPU running behind the host."""

    def _ready(self, stamp: float) -> bool:
        return time.perf_counter() >= stamp + 0.03


def test_a_mark_behind_unfinished_steps_ends_its_stretch_when_they_finish(tmp_path, monkeypatch):
    """The stretch before a mark ends once the steps before it complete, not at the next sample
    0.5 s on: its steps/s is the loop's, not diluted by the wait."""
    monkeypatch.setattr("gpudash.tracking.tracker.StepStamps", _LaggingStamps)
    path = tmp_path / "run.csv"
    with gpudash.track(path, interval_s=0.5) as tracker:
        train(tracker, 0.8, 1.0)
        tracker.mark("after")
        train(tracker, 0.8, 1.0)
    rates = [s.steps_per_s for s in samples(messages(path))]
    change = next(i for i, e in enumerate(messages(path)) if isinstance(e, Event) and e.kind is EventKind.CHANGED)
    before = [m for m in messages(path)[:change] if isinstance(m, Sample)][-1]
    steady = sorted(rates)[len(rates) // 2]
    assert before.steps_per_s == pytest.approx(steady, rel=0.2), (before.steps_per_s, rates)


def test_count_syncs_on_the_cpu_says_it_counts_on_cuda_only(tmp_path):
    path = tmp_path / "run.csv"
    with gpudash.track(path, interval_s=0.05) as tracker:
        with tracker.count_syncs() as window:
            train(tracker, 0.2, 1.0)
    assert window.syncs is None and window.per_step is None and window.steps > 0
    (measured,) = [e for e in events(messages(path)) if e.kind == EventKind.MEASURED]
    assert measured.what == "syncs" and "CUDA only" in measured.message


def test_weighted_percentile_is_the_percentile_of_the_steps():
    rng = random.Random(3)
    for _ in range(200):
        groups = [(round(rng.uniform(0.1, 20), 2), rng.randint(1, 64)) for _ in range(rng.randint(1, 12))]
        expanded = sorted(ms for ms, n in groups for _ in range(n))
        for q in (0, 50, 95, 100):
            assert weighted_percentile(groups, q) == pytest.approx(percentile(expanded, q))


# -- NVML, faked at the pynvml boundary ---------------------------------------------------------------------


def test_gpu_columns_come_from_nvml_and_its_loss_is_one_warning(tmp_path, monkeypatch, capfd):
    nvml = fake_gpus(2)
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    path = tmp_path / "run.csv"
    with gpudash.track(path, interval_s=0.05, device="cpu") as tracker:
        train(tracker, 0.4, 2.0)
        nvml.lost = {0, 1}  # the GPUs fall off the bus: every query raises GPU_IS_LOST
        assert isinstance(nvml.lost, set) and GPU_IS_LOST == 15
        after = train(tracker, 0.4, 2.0)  # the loop goes on
    assert after > 0
    err = capfd.readouterr().err
    assert err.count(WARNING) == 1 and "NVML lost the GPU" in err and "recording goes on" in err
    msgs = messages(path)
    gpu = [m for m in msgs if isinstance(m, GpuSample)]
    assert gpu and gpu[0].gpu_util_pct == 10.0 and [r.index for r in gpu[0].per_gpu] == [0, 1]
    lost = next(e for e in events(msgs) if e.kind == EventKind.ERROR)
    assert lost.what == "nvml"
    later = [m for m in msgs if m.time_s > lost.time_s]
    assert samples(later) and not any(isinstance(m, GpuSample) for m in later)  # samples go on, no GPU columns
    assert events(msgs)[-1].kind == EventKind.STOPPED
    assert read_sidecar(path).data["gpu_names"] == ["Fake GPU 0", "Fake GPU 1"]


def run_python(code: str, cwd: Path, **kw: Any) -> subprocess.CompletedProcess[str]:
    """``python -c code`` in ``cwd``, its output captured."""
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=120, **kw)


# -- data-parallel jobs --------------------------------------------------------------------------------------


def test_by_default_only_rank_0_writes(tmp_path, monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    tracker = gpudash.track(tmp_path / "run.csv")
    tracker.step(samples=8)
    tracker.close()
    assert tracker.path is None and list(tmp_path.iterdir()) == []


def test_per_rank_each_rank_writes_its_own_file(tmp_path, monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    with gpudash.track(tmp_path / "run.csv", per_rank=True, interval_s=0.05) as tracker:
        train(tracker, 0.2, 2.0)
    assert tracker.path == tmp_path / "run.rank1.csv"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.rank1.csv", "run.rank1.json"]
    ss = samples(messages(tmp_path / "run.rank1.csv"))
    assert ss and {s.world_size for s in ss} == {2}
    assert read_sidecar(tmp_path / "run.rank1.csv").data["rank"] == 1


def test_steps_all_taken_at_the_end_still_make_a_sample(tmp_path, monkeypatch):
    """A loop that ends before the writer first looks (a short one, a busy machine) is recorded."""
    from gpudash.tracking import writer

    monkeypatch.setattr(writer, "FIRST_POLL_S", 60.0)  # the writer does not look before the end
    path = tmp_path / "run.csv"
    with gpudash.track(path, interval_s=30.0) as tracker:
        for _ in range(100):
            tracker.step(samples=2)
    (last,) = samples(messages(path))
    assert (last.steps, last.samples) == (100, 200) and last.interval_s > 0 and last.steps_per_s > 0
