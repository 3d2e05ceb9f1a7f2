"""``gpudash -- CMD`` on a GPU: a job's step time from CUDA events, its syncs named by their lines,
a profiler window inside the job, ``diagnose`` naming the lines that make it sync-bound, and a bf16
job's model FLOPs counted in bf16 with its MFU over the GPU's datasheet peak."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

SCRIPT = Path(__file__).parent / "data" / "jobs" / "cuda_syncs.py"
PLAIN = Path(__file__).parent / "data" / "jobs" / "plain_loop.py"


def _line(marker: str) -> int:
    lines = SCRIPT.read_text().splitlines()
    return next(i for i, text in enumerate(lines, 1) if f"# SYNC: {marker}" in text)


def _gpudash(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpudash", *args], capture_output=True, text=True, timeout=300)


def test_a_cuda_jobs_steps_are_timed_and_its_syncs_named_by_line(tmp_path: Path) -> None:
    out = tmp_path / "r.csv"
    gpudash = ["record", str(out), "-q", "--duration", "6", "--trace-every", "1", "--trace-steps", "5"]
    done = _gpudash(*gpudash, "--", sys.executable, str(SCRIPT), "10000000")
    assert done.returncode == 0, done.stderr
    with open(out, newline="") as f:
        rows = list(csv.DictReader(f))
    timed = [r for r in rows if r["row_kind"] == "sample" and r["step_ms_p50"]]
    assert len(timed) > 4 and all(float(r["syncs_per_step"]) == pytest.approx(2.0, abs=0.05) for r in timed[1:-1])
    (table,) = json.loads(out.with_suffix(".json").read_text())["sync_sites"].values()
    lines = {(Path(s["site"]["file"]).name, s["site"]["line"]) for s in table["sites"] if "site" in s}
    assert lines == {("cuda_syncs.py", _line("bool")), ("cuda_syncs.py", _line("item"))}
    traces = [r for r in rows if r["event_kind"] == "measured" and r["event_what"] == "trace"]
    assert traces and Path(traces[0]["event_message"].rsplit("→ ", 1)[1]).is_file()


def test_diagnose_of_a_cuda_job_names_its_sync_lines(tmp_path: Path) -> None:
    done = _gpudash("diagnose", "--json", "--warmup", "2", "--", sys.executable, str(SCRIPT), "100000")
    assert done.returncode == 0, done.stderr
    verdict = json.loads(done.stdout)
    assert verdict["bound"] == "sync-bound", verdict
    assert f"cuda_syncs.py:{_line('item')}" in verdict["why"]
    # issue 56: removing the syncs of this launch-bound loop is worth little, and the next limit is named
    syncs = [r for r in verdict["remedies"] if r["limit"] == "syncs"]
    assert all(r["up_to"] <= 1.5 and r["then"] for r in syncs), verdict["remedies"]
    assert verdict["evidence"]["host_wait_ms"] > 0  # the host's waits, read from the trace's sync calls


@pytest.mark.parametrize("half", ["bf16", "fp16"])
def test_a_half_precision_jobs_flops_are_counted_in_its_dtype_and_its_mfu_is_over_that_peak(
    tmp_path: Path, half: str
) -> None:
    """fp16 is fp16: its own dtype and the GPU's fp16 peak (the same figure as bf16's on an H100)."""
    import torch

    from gpudash.core.peaks import choose_peak
    from gpudash.engine.model_flops import flop_text

    peak = choose_peak(torch.cuda.get_device_name(), half)
    assert peak.tflops is not None, peak.source  # an H100 (or another GPU of the table)
    out = tmp_path / "r.csv"
    job = [sys.executable, str(PLAIN), "--steps", "10000000", "--device", "cuda", f"--{half}", "--hidden", "4096"]
    job += ["--batch", "512", "--workers", "0", "--sleep", "0"]
    done = _gpudash("record", str(out), "-q", "--duration", "8", "--", *job)
    assert done.returncode == 0, done.stderr
    with open(out, newline="") as f:
        rows = list(csv.DictReader(f))
    flops = 3 * (2 * 512 * 16 * 4096 + 2 * 512 * 4096) - 2 * 512 * 16 * 4096  # forward ×3, less an input gradient
    (event,) = [r for r in rows if r["event_kind"] == "measured" and r["event_what"] == "flops"]
    assert event["event_message"] == (
        f"model FLOPs: {flop_text(flops)} a step ({half} 100%); MFU over {peak.tflops:g} TFLOP/s ({peak.source})"
    )
    timed = [r for r in rows if r["row_kind"] == "sample" and float(r["steps_per_s"]) > 0]
    assert len(timed) > 4
    for r in timed:
        assert float(r["flops_per_step"]) == flops
        assert float(r["tflops"]) == pytest.approx(flops * float(r["steps_per_s"]) / 1e12, rel=1e-4)
        assert 0 < float(r["mfu_pct"]) < 100
        assert float(r["mfu_pct"]) == pytest.approx(100 * float(r["tflops"]) / peak.tflops, rel=1e-4)


def test_a_jobs_own_warnings_filter_and_sync_guard_are_left_to_it(tmp_path: Path) -> None:
    """Its ``simplefilter("error")`` around ``.item()`` raises nothing under gpudash (the sync is
    counted, on its line), and its own ``set_sync_debug_mode("error")`` catches every sync as bare."""
    out = tmp_path / "strict.csv"
    done = _gpudash("record", str(out), "-q", "--", sys.executable, str(SCRIPT), "300", "--strict-warnings")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert "JOB steps=300" in done.stdout
    (table,) = json.loads(out.with_suffix(".json").read_text())["sync_sites"].values()
    lines = {s["site"]["line"] for s in table["sites"] if "site" in s}
    assert _line("strict item") in lines
    guarded = _gpudash(
        "record", str(tmp_path / "guard.csv"), "-q", "--", sys.executable, str(SCRIPT), "300", "--sync-guard"
    )
    assert guarded.returncode == 0, guarded.stderr[-2000:]
    assert "caught=300" in guarded.stdout  # as bare: every sync caught by the job's own guard


def test_a_profiler_window_of_thousands_of_small_operators_is_read_within_a_memory_bound(tmp_path: Path) -> None:
    """Issue 54, item 12: a step of ~5,000 small operators, a window every few seconds: gpudash's own
    memory stays bounded while it reads the traces, and a window cut short says so."""
    import time

    import psutil

    out = tmp_path / "ops.csv"
    job = [sys.executable, str(Path(__file__).parent / "data" / "jobs" / "many_ops.py"), "--steps", "400"]
    args = ["record", str(out), "-q", "--trace-every", "5", "--", *job]
    proc = subprocess.Popen([sys.executable, "-m", "gpudash", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    gpudash = psutil.Process(proc.pid)
    peak = 0
    while proc.poll() is None:
        try:
            peak = max(peak, gpudash.memory_info().rss)
        except psutil.Error:
            break
        time.sleep(0.05)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err.decode()[-2000:]
    rows = list(csv.DictReader(out.open()))
    traces = [r for r in rows if r["event_kind"] == "measured" and r["event_what"] == "trace"]
    sizes = [p.stat().st_size for p in tmp_path.rglob("*.json") if p.name != "ops.json"]
    assert traces, [r["event_message"] for r in rows if r["row_kind"] == "event"]
    print(f"gpudash peak RSS {peak / 2**20:.0f} MiB; traces of {[round(s / 2**20) for s in sizes]} MiB")
    assert peak < 700 * 2**20, f"gpudash's RSS peaked at {peak / 2**20:.0f} MiB"
