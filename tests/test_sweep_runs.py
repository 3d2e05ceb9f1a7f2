"""``gpudash sweep`` for real: tiny sweeps on the CPU (their files, verdicts and stage timings, an
A/A), Ctrl-C and a killed workload, knobs, and on a GPU."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from gpudash.sweep.plan import schedule
from tests import printed
from tests.helpers import once_per_session, timing
from tests.test_sweep import ROOT, rows, run


# -- real sweeps on the CPU ------------------------------------------------------------------------
def _optional(text: str) -> float | None:
    return float(text) if text else None


LABELS = ["fixed", "fixed#2", "sync-heavy", "fixed+channels_last"]
TINY = [*timing(repeats=2, seconds=1.5, warmup=0.2), "-q"]  # the figures come from the 1.5 s, not the warm-up
# (every sweep here warms up 0.2 s after a switch: what the tests read is the windows, not their warm-up)


@pytest.fixture(scope="module")
def tiny_sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One tiny real sweep on the CPU, shared by the tests below (once per session): an A/A pair
    (``fixed`` twice), another variant and a knob setting, 2 repeats of 1.5 s each."""

    def sweep() -> Path:
        out = tmp_path_factory.mktemp("sweep") / "sw"
        had_torch = "torch" in sys.modules
        variants = "fixed,fixed,sync-heavy,fixed+channels_last"
        assert run(["sweep", "-w", "sync_loss", "-v", variants, "-b", "2", *TINY, "--out", str(out)]) == 0
        assert had_torch or "torch" not in sys.modules  # torch only in the workload child
        return out

    return once_per_session(tmp_path_factory, "test_sweep_runs-tiny_sweep", sweep)


def _shown_ratio(md: str, label: str, verdict: str, both_intervals: bool) -> float:
    """The ratio sweep.md shows in ``label``'s row (with its interval, or saying there is none), and
    its verdict (a loaded machine marks it "⚠ noisy": read by its parts)."""
    (row,) = [printed.cells(line) for line in md.splitlines() if line.startswith(f"| {label} |")]
    shown, (said, rest, _) = printed.compared(row[-2]), printed.verdict(row[-1])
    assert shown is not None and shown.has_interval == both_intervals and said == verdict, row
    if not both_intervals:  # no interval: the ratio says so, and the verdict which --seconds would give one
        assert said == "too short" and re.search(r"use --seconds ≥ \d+", rest), row
    return shown.ratio


@pytest.mark.slow
def test_tiny_real_sweep(tiny_sweep: Path) -> None:
    # How many samples a 1.5 s repeat gets, and so whether a summary has an interval, depends
    # on how busy the machine is: both outcomes are checked for what the files must then say.
    out = tiny_sweep
    repeats, summaries = rows(out, "repeat"), rows(out, "summary")
    assert len(repeats) == 8 and len(summaries) == 4
    assert all(not r["error"] and float(r["steps_per_s"]) > 0 and int(r["n_samples"]) >= 1 for r in repeats)
    assert [r["variant"] for r in repeats] == [LABELS[i] for order in schedule(4, 2, seed=0) for i in order]
    md = (out / "sweep.md").read_text()
    base = summaries[0]
    for label, s in zip(LABELS, summaries, strict=True):
        assert s["variant"] == label
        assert int(s["n_samples"]) == sum(int(r["n_samples"]) for r in repeats if r["variant"] == label)
        low, mean, high = _optional(s["steps_per_s_low"]), float(s["steps_per_s"]), _optional(s["steps_per_s_high"])
        assert (low, high) == (None, None) or (low is not None and high is not None and low <= mean <= high)
        if s is base:
            continue
        assert float(s["ratio"]) == pytest.approx(float(s["steps_per_s"]) / float(base["steps_per_s"]), rel=1e-4)
        both_intervals = bool(base["steps_per_s_low"] and s["steps_per_s_low"])
        assert (s["verdict"] == "too short") == (not both_intervals)
        assert bool(s["ratio_low"]) == both_intervals
        # the report's ratio is the CSV's, rounded to its interval's digits (compared as numbers: the
        # CSV keeps 6 significant digits, so a ratio at a rounding boundary may print either way)
        assert abs(_shown_ratio(md, label, s["verdict"], both_intervals) - float(s["ratio"])) <= 0.0051
    (baseline,) = [printed.cells(line) for line in md.splitlines() if line.startswith(f"| {LABELS[0]} |")]
    shown = printed.compared(baseline[-2])
    assert base["ratio"] == "1" and "| relative speed |" in md and shown is not None and shown.ratio == 1.0
    assert printed.verdict(baseline[-1])[1].startswith("(baseline"), baseline
    assert "gpudash sweep -w sync_loss -v fixed,fixed,sync-heavy,fixed+channels_last -b 2" in md
    # a loaded machine (this suite runs two tests at once) says so: a verdict it touched is marked
    noisy = [r for r in summaries if r["noise"]]
    assert ("⚠ The machine was noisy" in md) == bool(noisy) and "## Noise" in md
    assert "overlap bound" not in md and not any(r["overlap_bound"] for r in repeats)  # one stage only
    assert (out / "sweep.png").stat().st_size > 0 and (out / "sweep.svg").stat().st_size > 0
    meta = json.loads((out / "sweep.json").read_text())
    assert meta["device"] == "cpu" and meta["torch_version"] and meta["exit_code"] == 0


@pytest.mark.slow
def test_two_stage_families_time_each_stage_and_report_the_overlap_bound(tmp_path: Path) -> None:
    out = tmp_path / "stages"
    assert run(["sweep", "-w", "encdec", "-b", "2", *timing(warmup=0.2), "-q", "--out", str(out)]) == 0
    (repeat,), (summary,) = rows(out, "repeat"), rows(out, "summary")
    for row in (repeat, summary):
        assert (row["stage1"], row["stage2"]) == ("encode", "train")
        slowest = max(float(row["stage1_ms"]), float(row["stage2_ms"]))
        assert float(row["overlap_bound"]) == pytest.approx(1000 / slowest, rel=1e-4)
        assert float(row["pct_of_bound"]) == pytest.approx(
            100 * float(row["steps_per_s"]) / float(row["overlap_bound"]), rel=1e-4
        )
    md = (out / "sweep.md").read_text()
    assert "| overlap bound (steps/s) |" in md and "| serial | encode " in md


@pytest.mark.slow
def test_an_aa_sweep_measures_the_same_configuration_twice_and_its_csv_carries_the_verdict(tiny_sweep: Path) -> None:
    # Whether a real A/A run says "no change detected" is a property of the statistics
    # (test_comparison.py checks its false-alarm rate on synthetic series; docs/BENCHMARKS.md
    # shows the GPU's). A 2-core CI machine drifts by ±15% within seconds: here, the wiring.
    from gpudash.stats.comparison import Estimate, compare

    summaries = rows(tiny_sweep, "summary")
    assert [s["variant"] for s in summaries][:2] == ["fixed", "fixed#2"]
    # the second "fixed" is switched to without a control (no rebuild), and measured as often
    assert [r["variant"] for r in rows(tiny_sweep, "repeat")].count("fixed#2") == 2

    def estimate(row: dict[str, str]) -> Estimate:
        batches = tuple(float(b) for b in row["steps_per_s_batches"].split(";") if b)
        return Estimate(
            float(row["steps_per_s"]),
            _optional(row["steps_per_s_low"]),
            _optional(row["steps_per_s_high"]),
            int(row["n_samples"]),
            batches,
        )

    # whatever the machine's load made of the intervals, the file alone reproduces its verdict
    a, b = estimate(summaries[0]), estimate(summaries[1])
    again = compare(a, b)
    assert float(summaries[1]["ratio"]) == pytest.approx(b.mean / a.mean, rel=1e-4)
    assert summaries[1]["verdict"] == again.verdict.value
    assert _optional(summaries[1]["ratio_low"]) == (None if again.low is None else pytest.approx(again.low, rel=1e-3))


def _sweep_process(out: Path, repeats: int) -> subprocess.Popen[str]:
    sweep = ["sweep", "-w", "sync_loss", "-v", "sync-heavy,fixed", "-b", "2", *timing(repeats, warmup=0.2), "-q"]
    sweep += ["--out", str(out)]
    cmd = [sys.executable, "-m", "gpudash", *sweep]
    return subprocess.Popen(
        cmd,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def _wait_for_rows(out: Path, proc: subprocess.Popen[str], n: int, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        if (out / "sweep.csv").exists() and len(rows(out, "repeat")) >= n:
            return
        time.sleep(0.1)
    raise AssertionError(f"no {n} repeat rows: {proc.poll()} {proc.communicate() if proc.poll() is not None else ''}")


def _stopped_sweep(
    out: Path, after_rows: int, stop: Callable[[subprocess.Popen[str]], None], timeout: float
) -> tuple[int, str]:
    """A sweep of 3 repeats, ``stop(proc)`` once ``after_rows`` repeat rows are written: its exit status and stderr."""
    proc = _sweep_process(out, repeats=3)
    try:
        _wait_for_rows(out, proc, after_rows)
        stop(proc)
        _, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, err


@pytest.mark.slow
def test_ctrl_c_keeps_the_finished_rows(tmp_path: Path) -> None:
    out = tmp_path / "int"
    code, err = _stopped_sweep(out, 2, lambda proc: proc.send_signal(signal.SIGINT), timeout=120)
    assert code == 130, err
    finished = rows(out, "repeat")
    assert 2 <= len(finished) < 6 and all(not r["error"] for r in finished)
    assert {s["variant"] for s in rows(out, "summary")} == {"sync-heavy", "fixed"}
    assert "interrupted by SIGINT" in (out / "sweep.md").read_text()
    assert json.loads((out / "sweep.json").read_text())["exit_code"] == 130


@pytest.mark.slow
def test_a_killed_workload_keeps_what_finished_and_exits_1(tmp_path: Path) -> None:
    out = tmp_path / "killed"

    def kill_the_workload(_: subprocess.Popen[str]) -> None:
        os.kill(int(json.loads((out / "sweep.json").read_text())["started"]["pid"]), signal.SIGKILL)

    code, err = _stopped_sweep(out, 1, kill_the_workload, timeout=120)
    assert code == 1, err
    assert "error: workload failed" in err and "SIGKILL" in err
    finished = rows(out, "repeat")
    assert 1 <= len(finished) < 6 and all(not r["error"] for r in finished)
    assert rows(out, "summary")  # the finished configurations are summarized
    assert "workload failed" in (out / "sweep.md").read_text()
    assert json.loads((out / "sweep.json").read_text())["exit_code"] == 1


# -- on a GPU ------------------------------------------------------------------------------------------
@pytest.mark.gpu
def test_gpu_sweep_times_the_stages_and_no_pipeline_beats_its_overlap_bound(tmp_path: Path) -> None:
    out = tmp_path / "gpu"
    # Batch 32: its stages are GPU-bound, so each alone times the GPU. At batch 8 the host's launch
    # rate sets both stage times and steps/s, and a loaded host (a full `-m gpu` run) moved one
    # repeat's bound below the pipeline's rate (112% on an H100, 2026-11-22).
    assert run(["sweep", "-w", "encdec", "-b", "32", *timing(2, 2, 1, "cuda"), "-q", "--out", str(out)]) == 0
    summary = {r["variant"]: r for r in rows(out, "summary")}
    assert set(summary) == {"serial", "pipelined"}
    for row in summary.values():
        assert float(row["gpu_util_pct"]) > 0 and float(row["joules_per_step"]) > 0  # NVML, for real
        assert float(row["pct_of_bound"]) < 105  # two stages cannot overlap into more than the slower one
    assert summary["pipelined"]["verdict"] in ("faster", "slower", "within noise", "no change detected")
    meta = json.loads((out / "sweep.json").read_text())
    assert meta["gpu_name"] and meta["driver"] and meta["device"].startswith("cuda")


# -- knobs -----------------------------------------------------------------------------------------
@pytest.mark.slow
def test_a_sweep_measures_knob_settings_side_by_side_and_its_csv_reads_back(tiny_sweep: Path) -> None:
    from gpudash.report.load import load_run
    from gpudash.sweep.readback import summaries_from_csv
    from gpudash.sweep.report import table_row

    out = tiny_sweep
    summaries = [s for s in rows(out, "summary") if s["variant"] in ("fixed", "fixed+channels_last")]
    assert [(s["variant"], s["knobs"]) for s in summaries] == [
        ("fixed", "none"),
        ("fixed+channels_last", "channels_last=on"),
    ]
    assert summaries[0]["ratio"] == "1" and summaries[1]["verdict"]  # against the plain variant
    md = (out / "sweep.md").read_text()
    ((_, read),) = summaries_from_csv(out / "sweep.csv")
    assert [s.config.knobs for s in read] == ["none", "none", "none", "channels_last=on"]
    for s in read:  # the file alone reproduces the table
        assert table_row(s).split(" | ")[:2] in [ln.split(" | ")[:2] for ln in md.splitlines()]
    keys = [c.key for c in load_run(out / "sweep.csv").configs]
    assert ("sync_loss", "fixed", 2, "none") in keys and keys[-1] == ("sync_loss", "fixed", 2, "channels_last=on")
    meta = json.loads((out / "sweep.json").read_text())
    assert meta["knobs"] == "none" and meta["families"][0]["configurations"][3]["knobs"] == "channels_last=on"


@pytest.mark.slow
def test_knob_applies_to_every_configuration_and_a_cuda_only_entry_is_skipped_on_a_cpu(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "amp"
    variants = "fixed+cuda_graph,sync-heavy,fixed+channels_last"
    argv = ["sweep", "-w", "sync_loss", "-v", variants, "--knob", "amp=bf16", "-b", "2", *timing(warmup=0.2), "-q"]
    assert run([*argv, "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "gpudash: skipping sync_loss fixed+cuda_graph: knob cuda_graph needs CUDA" in err
    summaries = rows(out, "summary")
    assert [(s["variant"], s["knobs"]) for s in summaries] == [
        ("sync-heavy", "amp=bf16"),
        ("fixed+channels_last", "amp=bf16,channels_last=on"),
    ]
    assert all(not s["error"] and float(s["steps_per_s"]) > 0 for s in summaries)
    assert json.loads((out / "sweep.json").read_text())["knobs"] == "amp=bf16"
    md = (out / "sweep.md").read_text()
    assert "- **Knobs on every configuration:** amp=bf16" in md and "| fixed+channels_last | " in md
    assert "knob cuda_graph needs CUDA" in md  # the skipped entry, in the notes
