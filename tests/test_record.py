"""``gpudash --record``: CSV and JSON as a user reads them, signals, a killed child, a full disk (its
writer, ``CsvRecorder``, in-process: tests/test_csv_recorder.py)."""

from __future__ import annotations

import csv
import io
import json
import os
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gpudash.core.protocol import RunConfig
from gpudash.recording import csvformat
from tests.helpers import CSV_COLUMNS_0_1
from workloads.registry import FAMILIES

COLUMNS = csvformat.COLUMNS
TEXT_0_1 = ("row_kind", "workload", "variant", "throttle")  # and the event_ columns
NUMERIC = [c for c in CSV_COLUMNS_0_1 if c not in TEXT_0_1 and not c.startswith("event_")]  # the 0.1 columns of numbers
GPU = ["gpu_util_pct", "mem_bw_util_pct", "mem_used_mib", "mem_total_mib", "power_w", "sm_clock_mhz", "temp_c"]


def gpudash(*args: str, cwd: Path, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpudash", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout
    )


def start(*args: str, cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "gpudash", *args], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def assert_header(header: list[str]) -> None:
    """Today's columns, then the per-GPU columns of each GPU NVML watched (none without NVML)."""
    assert header[: len(COLUMNS)] == COLUMNS
    assert header[len(COLUMNS) :] == csvformat.per_gpu_columns(csvformat.per_gpu_indexes(header))


def assert_intact(path: Path) -> list[list[str]]:
    """Every line complete: the header, then rows with exactly as many fields."""
    text = path.read_text()
    assert text.endswith("\n")
    rows = list(csv.reader(io.StringIO(text)))
    assert_header(rows[0])
    assert all(len(r) == len(rows[0]) for r in rows), "a row with a different number of fields"
    return rows


def wait_for_samples(path: Path, proc: subprocess.Popen[str], n: int, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().count("\nsample,") >= n:
            return
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    raise AssertionError(f"no {n} sample rows in {path} after {timeout} s")


def recording_with_child(tmp_path: Path, name: str, samples: int) -> tuple[subprocess.Popen[str], int]:
    """``gpudash --record NAME.csv`` on the CPU, once it has written ``samples`` rows; and the
    workload child's pid."""
    proc = start("--record", f"{name}.csv", "--device", "cpu", "--sample-interval", "0.1", cwd=tmp_path)
    try:
        wait_for_samples(tmp_path / f"{name}.csv", proc, samples)
        return proc, child_pid(tmp_path / f"{name}.json")
    except BaseException:
        proc.kill()
        raise


def child_pid(meta: Path, timeout: float = 30) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            return int(json.loads(meta.read_text())["started"]["pid"])
        except (OSError, KeyError, ValueError, TypeError):
            time.sleep(0.05)
    raise AssertionError("the metadata never named the workload process")


def gone(pid: int, timeout: float = 15) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


# -- every family, on the CPU, through the real CLI ------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("name", list(FAMILIES))
def test_record_every_family(tmp_path: Path, name: str) -> None:
    r = gpudash(
        "--record",
        "run.csv",
        "-w",
        name,
        "--device",
        "cpu",
        "--steps",
        "2",  # a count, not seconds: ResNet-50's CPU steps take ~5 s of CPU each (the last step ends in a sample)
        "--sample-interval",
        "0.2",
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout == ""  # diagnostics go to stderr only
    assert all(line.startswith("gpudash: ") for line in r.stderr.splitlines())

    df = pd.read_csv(tmp_path / "run.csv")
    assert_header(list(df.columns))
    assert set(df.row_kind) == {"sample", "event", "summary"}
    s = df[df.row_kind == "sample"]
    assert len(s) >= 1
    for col in NUMERIC:
        assert pd.api.types.is_numeric_dtype(df[col]), col
    info = FAMILIES[name]
    assert set(s.workload) == {name} and set(s.variant) == {info.default_variant}
    # issue 64: what its optimizer's parameters, their gradients and its state hold (SGD: no state, or a
    # momentum buffer the size of the parameters; AdamW: two moments), as for a job
    last = s.iloc[-1]
    assert last.mem_params_mib > 0 and last.mem_grads_mib == pytest.approx(last.mem_params_mib)
    assert min(abs(last.mem_optimizer_mib / last.mem_params_mib - k) for k in (0, 1, 2)) < 0.001
    assert set(s.batch_size) == {info.cpu_defaults.batch_size}
    assert (s.steps_per_s >= 0).all() and s.steps_per_s.max() > 0
    np.testing.assert_allclose(
        s.samples_per_s, s.steps_per_s * s.batch_size, rtol=1e-4
    )  # each cell has 6 significant digits
    assert s.steps.is_monotonic_increasing and s.steps.iloc[-1] > 0
    assert (s.step_ms_p50.dropna() > 0).all() and (s.step_ms_p95.dropna() >= s.step_ms_p50.dropna()).all()
    assert s.syncs_per_step.isna().all()  # not countable on the CPU
    assert s.loss.notna().any()
    events = df[df.row_kind == "event"]
    kinds = list(events.event_kind)
    assert kinds[:2] == ["starting", "started"] and kinds[-1] == "stopped"
    assert events[events.event_kind == "started"].variant.iloc[0] == info.default_variant

    meta = json.loads((tmp_path / "run.json").read_text())
    assert meta["config"]["workload"] == name
    assert meta["torch_version"] and meta["torch_version"][0].isdigit()
    assert meta["device"] == "cpu"
    assert datetime.fromisoformat(meta["start_time"]).tzinfo is not None
    assert meta["hostname"] and meta["gpudash_version"]
    assert meta["exit_code"] == 0 and meta["status"] == "done"
    if meta["nvml_unavailable"]:  # no GPU telemetry here: empty cells, and the JSON says why
        assert df[GPU].isna().all().all()
    else:
        assert meta["gpu_name"] and meta["driver"]
    assert (tmp_path / "run.log").exists()  # the workload's own output


@pytest.mark.slow
def test_parent_never_imports_torch_or_textual_and_stdout_csv(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from gpudash.cli.main import main\n"
        "rc = main(['--record', '-', '--device', 'cpu', '--steps', '3', '-q', '--log', 'child.log'])\n"
        "print('MODULES', rc, sorted(m for m in ('torch', 'textual') if m in sys.modules), file=sys.stderr)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=180)
    assert "MODULES 0 []" in r.stderr, r.stderr
    df = pd.read_csv(io.StringIO(r.stdout))  # stdout holds the CSV and nothing else
    assert_header(list(df.columns))
    s = df[df.row_kind == "sample"]
    assert s.steps.iloc[-1] == 3  # --steps: the child stops after exactly 3
    assert df.event_kind.dropna().iloc[-1] == "stopped"
    assert not list(tmp_path.glob("*.json"))  # '-' writes no metadata file


# -- signals and a killed child ---------------------------------------------------------------------------


@pytest.mark.slow
def test_sigkill_of_the_child_fails_cleanly(tmp_path: Path) -> None:
    proc, pid = recording_with_child(tmp_path, "k", 3)
    try:
        os.kill(pid, signal.SIGKILL)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 1
    assert "SIGKILL" in err and "error" in err
    rows = assert_intact(tmp_path / "k.csv")
    last = dict(zip(COLUMNS, rows[-1], strict=False))
    assert last["row_kind"] == "event" and last["event_kind"] == "crashed"
    assert "SIGKILL" in last["event_message"]
    meta = json.loads((tmp_path / "k.json").read_text())
    assert meta["exit_code"] == 1


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupt_gives_130_and_an_intact_csv(tmp_path: Path, sig: signal.Signals) -> None:
    proc, pid = recording_with_child(tmp_path, "i", 2)
    try:
        proc.send_signal(sig)  # the recorder only, as `kill` would
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    rows = assert_intact(tmp_path / "i.csv")
    assert dict(zip(COLUMNS, rows[-1], strict=False))["event_kind"] == "stopped"  # the child stopped cleanly
    assert "interrupted" in err
    assert gone(pid), "the workload process outlived the recorder"
    assert json.loads((tmp_path / "i.json").read_text())["exit_code"] == 130


@pytest.mark.slow
def test_repeated_ctrl_c_terminates_the_child_and_still_closes_the_record(tmp_path: Path) -> None:
    proc, pid = recording_with_child(tmp_path, "c", 2)
    try:
        for _ in range(3):  # impatient: the second terminates the child, the third changes nothing
            proc.send_signal(signal.SIGINT)
            time.sleep(0.02)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert_intact(tmp_path / "c.csv")
    assert gone(pid), "the workload process outlived the recorder"
    meta = json.loads((tmp_path / "c.json").read_text())
    assert meta["exit_code"] == 130 and meta["status"].startswith("interrupted") and meta["end_time"]


def test_full_disk_at_start_is_one_error_line(tmp_path: Path) -> None:
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    r = gpudash("--record", "/dev/full", "--device", "cpu", cwd=tmp_path, timeout=60)
    assert r.returncode == 2  # refused before anything starts: a device is not a file to record to
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpudash: error:") and "not a regular file" in lines[0]


@pytest.mark.slow
@pytest.mark.skipif(os.path.exists("/dev/nvidia0"), reason="this machine has a GPU")
def test_a_workload_that_refuses_to_start_is_one_line_exit_2_and_leaves_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from gpudash.recording.headless import run_record

    # past the CLI's checks (as if a GPU were seen): the child itself refuses its configuration
    code = run_record(RunConfig(device="cuda"), tmp_path / "x.csv", duration_s=5, quiet=True)
    assert code == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "gpudash: error: --device cuda was asked for, but CUDA is not available here"
    ]
    assert list(tmp_path.iterdir()) == []  # no empty CSV, metadata or log behind


def test_a_workload_that_crashes_before_it_starts_keeps_its_log_and_names_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpudash.recording.headless import run_record

    monkeypatch.setenv("GPUDASH_MEMORY_LIMIT", "64M")  # importing torch fails under it: a crash, not a refusal
    code = run_record(RunConfig(workload="sync_loss", device="cpu", image_size=16), tmp_path / "x.csv", quiet=True)
    assert code == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "gpudash: error: the workload failed before it started, nothing recorded: "
    )
    assert lines[0].endswith(f"(see {tmp_path / 'x.log'})")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.log"]  # the log holds the traceback
    assert "Traceback" in (tmp_path / "x.log").read_text()


def test_the_metadata_says_what_ran_with_numbers_as_numbers(tmp_path: Path) -> None:
    """Issue 25: no null where the value is known, no count as a string."""
    from gpudash.recording.sidecar import read_sidecar
    from tests.tui.make_fixture import record as record_synthetic

    path = tmp_path / "run.csv"
    record_synthetic(path)  # asked for no variant or batch size: the family's defaults ran
    meta = json.loads(path.with_suffix(".json").read_text())
    assert meta["config"]["variant"] == "serial" and meta["config"]["batch_size"] == 8
    assert meta["started"]["batch_size"] == 8  # an int, not "8"
    assert isinstance(meta["started"]["device"], str)
    assert read_sidecar(path).data["started"]["batch_size"] == 8  # the checked reader takes it
