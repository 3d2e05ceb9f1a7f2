"""The edges of ``gpudash -- CMD`` on the CPU: a job behind a shell script, a job whose Python has
no gpudash, ``diagnose --keep-running``, and the notes for a job that says nothing (its Python skips
``sitecustomize``) or never steps an optimizer."""

from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpudash.core.protocol import Event, EventKind, RunConfig
from gpudash.job.session import JobSession

PLAIN = str(Path(__file__).parent / "data" / "jobs" / "plain_loop.py")


def _gpudash(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpudash", *args], capture_output=True, text=True, timeout=180)


@pytest.mark.slow
def test_a_job_behind_a_shell_script_is_measured(tmp_path: Path) -> None:
    script = tmp_path / "run.sh"
    script.write_text(f'#!/bin/sh\necho "starting"\nexec "{sys.executable}" "{PLAIN}" --steps 30 --workers 0 "$@"\n')
    script.chmod(0o755)
    out = tmp_path / "r.csv"
    done = _gpudash("record", str(out), "-q", "--", "bash", str(script), "--batch", "4")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("starting\n")
    with open(out, newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["row_kind"] == "sample"]
    assert rows[-1]["steps"] == "30" and rows[-1]["batch_size"] == "4"
    assert {r["workload"] for r in rows} == {"job:run.sh"} and {r["variant"] for r in rows} == {"--batch 4"}


@pytest.mark.slow
def test_the_jobs_python_needs_no_gpudash(tmp_path: Path) -> None:
    """The hooks are loaded from gpudash's files, never imported as gpudash: a job whose Python
    cannot import gpudash at all is measured the same."""
    job = tmp_path / "job.py"
    job.write_text(
        "import sys\n"
        "sys.modules['gpudash'] = None  # this Python has no gpudash: importing it fails\n"
        f"sys.argv = ['plain_loop.py', '--steps', '20', '--workers', '0']\n"
        f"exec(compile(open({PLAIN!r}).read(), {PLAIN!r}, 'exec'))\n"
    )
    out = tmp_path / "r.csv"
    done = _gpudash("record", str(out), "-q", "--", sys.executable, str(job))
    assert done.returncode == 0, done.stderr
    assert "hooks are off" not in done.stderr
    with open(out, newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["row_kind"] == "sample"]
    assert rows[-1]["steps"] == "20"


@pytest.mark.slow
def test_diagnose_keep_running_leaves_the_job_running(tmp_path: Path) -> None:
    os.chdir(tmp_path)
    marker = tmp_path / "pid"
    job = tmp_path / "job.py"
    job.write_text(
        f"import os\nopen({str(marker)!r}, 'w').write(str(os.getpid()))\n"
        f"import sys\nsys.argv = ['plain_loop.py', '--steps', '1000000', '--workers', '0']\n"
        f"exec(compile(open({PLAIN!r}).read(), {PLAIN!r}, 'exec'))\n"
    )
    argv = [
        sys.executable,
        "-m",
        "gpudash",
        "diagnose",
        "--warmup",
        "1",
        "--keep-running",
        "--",
        sys.executable,
        str(job),
    ]
    with open(tmp_path / "out", "w") as out, open(tmp_path / "err", "w") as err:  # the job keeps writing to them
        code = subprocess.run(argv, stdout=out, stderr=err, timeout=180).returncode
    assert code == 0, (tmp_path / "err").read_text()
    assert (tmp_path / "out").read_text().startswith("CPU-bound: ")
    assert "stopping the job" not in (tmp_path / "err").read_text()
    pid = int(marker.read_text())
    try:
        time.sleep(3.0)  # the reaper had its chance
        os.kill(pid, 0)  # still there
    finally:
        os.killpg(pid, signal.SIGKILL)


def _session(no_hello_s: float, no_step_s: float, *job: str) -> JobSession:
    config = RunConfig(workload="job:x", job=tuple(job), sample_interval_s=0.25)
    session = JobSession(config)
    session.no_hello_s, session.no_step_s = no_hello_s, no_step_s
    return session


def _notes(session: JobSession, seconds: float) -> list[str]:
    notes: list[str] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not session.finished:
        notes += [m.message for m in session.poll() if isinstance(m, Event) and m.kind == EventKind.ERROR]
        time.sleep(0.1)
    return notes


@pytest.mark.slow
def test_a_job_whose_python_skips_sitecustomize_gets_one_line_saying_so() -> None:
    session = _session(2.0, 60.0, sys.executable, "-I", "-c", "import time, torch; time.sleep(30)")
    session.start()
    try:
        notes = _notes(session, 8.0)
    finally:
        session.stop()
    assert notes == [
        "no word from the job after 2 s: it has not imported torch yet, or its Python skips "
        "sitecustomize (python -I, -E or -S)"
    ]


@pytest.mark.slow
def test_a_job_that_never_steps_an_optimizer_gets_a_note() -> None:
    session = _session(60.0, 4.0, sys.executable, "-c", "import time, torch; time.sleep(30)")
    session.start()
    try:
        notes = _notes(session, 15.0)
    finally:
        session.stop()
    assert notes == ["no optimizer step seen yet: is the job training with torch.optim?"]


def test_the_sync_counters_warning_handler_never_calls_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    """At every step boundary the hooks put their warning handler back if the job displaced it; a
    check by identity of a bound method (a new object each time) took the handler for a stranger
    and made it its own predecessor: the job's next other warning recursed until RecursionError
    (found on the H100, where syncs are counted). Other warnings still reach the handler before it."""
    import warnings

    import torch

    from tests.test_job_clock import job_parts

    parts, modes, shown = job_parts(monkeypatch)  # the sync debug mode needs a CUDA driver: kept there
    with warnings.catch_warnings():
        count = parts._SyncCount(torch)
        try:
            for _ in range(3):
                count.keep_watching()  # three step boundaries, nothing displaced
            warnings.warn("the job's own warning", UserWarning, stacklevel=1)
        finally:
            count.close()
    assert shown == ["the job's own warning"] and modes == ["warn", 0]


@pytest.mark.slow
def test_a_job_killed_by_a_signal_after_it_was_recorded_says_so_and_what_was_kept(tmp_path: Path) -> None:
    """The OOM killer's SIGKILL, say: the end names the signal, the exit status is the shell's
    (128 + 9), and the last line says what the recording kept rather than "workload failed"."""
    job = tmp_path / "job.py"
    job.write_text(
        "import os, signal, sys\n"
        f"sys.argv = ['plain_loop.py', '--steps', '30', '--workers', '0']\n"
        "try:\n"
        f"    exec(compile(open({PLAIN!r}).read(), {PLAIN!r}, 'exec'))\n"
        "finally:\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    out = tmp_path / "r.csv"
    done = _gpudash("record", str(out), "--", sys.executable, str(job))
    assert done.returncode == 128 + signal.SIGKILL
    with open(out, newline="") as f:
        rows = list(csv.DictReader(f))
    samples = [r for r in rows if r["row_kind"] == "sample"]
    assert (
        samples and 0 < int(samples[-1]["steps"]) <= 30
    )  # a SIGKILL'd job sends nothing more: the last steps may miss
    assert [r["event_message"] for r in rows if r["event_kind"] == "crashed"] == [
        "the job was killed by SIGKILL (exit status 137)"
    ]
    last = done.stderr.strip().splitlines()[-1]
    kept = f"{len(samples)} samples, {len(rows)} rows in {out}"
    assert last == f"gpudash: the job was killed by SIGKILL (exit status 137): {kept}"


@pytest.mark.slow
def test_diagnose_of_a_job_that_fails_first_names_no_scratch_file_and_says_nothing_of_stopping(tmp_path: Path) -> None:
    os.chdir(tmp_path)
    done = _gpudash(
        "diagnose", "--warmup", "60", "--", sys.executable, PLAIN, "--steps", "30", "--workers", "0", "--exit-code", "3"
    )
    assert done.returncode == 3
    assert " rows in " not in done.stderr and "stopping the job" not in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("gpudash: error: the job ended (exit code 3) after 30 steps")
