"""The edges of ``gpudash -- CMD`` on the CPU: a job behind a shell script, a job whose Python has
no gpudash, ``diagnose --keep-running``, the notes for a job that says nothing (its Python skips
``sitecustomize``) or never steps an optimizer, and a second recording to a CSV being recorded."""

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
from tests import printed
from tests.helpers import once_per_session

PLAIN = str(Path(__file__).parent / "data" / "jobs" / "plain_loop.py")


def _gpudash(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpudash", *args], capture_output=True, text=True, timeout=180)


@pytest.fixture(scope="module")
def behind_a_shell(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """``gpudash record -- bash run.sh --batch 4``: the script says "starting", then execs a Python job
    that cannot import gpudash (``sys.modules['gpudash'] = None``) running a plain loop of 30 steps
    with the script's arguments. Its CSV and gpudash's run."""
    tmp = tmp_path_factory.mktemp("shell")
    job = tmp / "job.py"
    job.write_text(
        "import sys\n"
        "sys.modules['gpudash'] = None  # this Python has no gpudash: importing it fails\n"
        "sys.argv = ['plain_loop.py', '--steps', '30', '--workers', '0', *sys.argv[1:]]\n"
        f"exec(compile(open({PLAIN!r}).read(), {PLAIN!r}, 'exec'))\n"
    )
    script = tmp / "run.sh"
    script.write_text(f'#!/bin/sh\necho "starting"\nexec "{sys.executable}" "{job}" "$@"\n')
    script.chmod(0o755)

    def record() -> tuple[Path, subprocess.CompletedProcess[str]]:
        done = _gpudash("record", str(tmp / "r.csv"), "-q", "--", "bash", str(script), "--batch", "4")
        assert done.returncode == 0, done.stderr
        return tmp / "r.csv", done

    return once_per_session(tmp_path_factory, "test_job_edges-shell", record)  # its tests may run in two workers


def _samples(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return [r for r in csv.DictReader(f) if r["row_kind"] == "sample"]


@pytest.mark.slow
def test_a_job_behind_a_shell_script_is_measured(behind_a_shell: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    out, done = behind_a_shell
    assert done.stdout.startswith("starting\n")
    rows = _samples(out)
    assert rows[-1]["steps"] == "30" and rows[-1]["batch_size"] == "4"
    assert {r["workload"] for r in rows} == {"job:run.sh"} and {r["variant"] for r in rows} == {"--batch 4"}


@pytest.mark.slow
def test_the_jobs_python_needs_no_gpudash(behind_a_shell: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    """The hooks are loaded from gpudash's files, never imported as gpudash: a job whose Python
    cannot import gpudash at all is measured the same."""
    out, done = behind_a_shell
    assert "hooks are off" not in done.stderr
    assert _samples(out)[-1]["steps"] == "30"


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


def _started_notes(session: JobSession) -> list[str]:
    """Start ``session``, read its error notes (``_notes``), stop it."""
    session.start()
    try:
        return _notes(session)
    finally:
        session.stop()


def _notes(session: JobSession, settle_s: float = 1.5, wait_s: float = 120.0) -> list[str]:
    """The session's error notes: polled until the first one comes (up to ``wait_s``), then ``settle_s``
    more for any other (or a repeat); or until the job ends."""
    notes: list[str] = []
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline and not session.finished:
        notes += [m.message for m in session.poll() if isinstance(m, Event) and m.kind == EventKind.ERROR]
        if notes and deadline - time.monotonic() > settle_s:
            deadline = time.monotonic() + settle_s
        time.sleep(0.1)
    return notes


@pytest.mark.slow
def test_a_job_whose_python_skips_sitecustomize_gets_one_line_saying_so() -> None:
    """No torch in it: with ``-I`` nothing of gpudash's runs in the job whether it imports torch or not."""
    session = _session(2.0, 60.0, sys.executable, "-I", "-c", "import time; time.sleep(60)")
    notes = _started_notes(session)
    assert notes == [
        "no word from the job after 2 s: it has not imported torch yet, or its Python skips "
        "sitecustomize (python -I, -E or -S)"
    ]


@pytest.mark.slow
def test_a_job_that_never_steps_gets_a_note_that_says_how_to_mark_its_steps() -> None:
    """The note comes at its time after the start, once the job's hooks have said hello (however long
    its torch import takes), and says how to mark its steps (issue 73)."""
    session = _session(120.0, 1.0, sys.executable, "-c", "import time, torch; time.sleep(120)")
    notes = _started_notes(session)
    assert notes == [
        "no step seen yet (no torch.optim step, no backward pass followed by its parameters changing, no "
        "gpudash.track() step): to mark its steps, call tracker.step() after each, with "
        "tracker = gpudash.track('steps.csv') made before its loop (docs/track.md)"
    ]


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
        count = parts.SyncCount(torch)
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
    kept = printed.Done("the job was killed by SIGKILL (exit status 137)", len(samples), len(rows), str(out))
    assert last.startswith("gpudash: ") and printed.done_line(last) == kept, last


@pytest.mark.slow
def test_diagnose_of_a_job_that_fails_first_names_no_scratch_file_and_says_nothing_of_stopping(tmp_path: Path) -> None:
    os.chdir(tmp_path)
    done = _gpudash(
        "diagnose", "--warmup", "60", "--", sys.executable, PLAIN, "--steps", "30", "--workers", "0", "--exit-code", "3"
    )
    assert done.returncode == 3
    assert printed.last_done(done.stderr) is None and "stopping the job" not in done.stderr  # nothing kept
    assert done.stderr.strip().splitlines()[-1].startswith("gpudash: error: the job ended (exit code 3) after 30 steps")


@pytest.mark.slow
def test_a_second_recording_to_a_csv_being_recorded_is_refused_with_one_line(tmp_path: Path) -> None:
    """Issue 54, item 6: two ``record``s on one CSV: the second is refused while the first holds it,
    ``--force`` or not; once the first has ended, the file is the user's to replace."""
    out, ready, go = tmp_path / "run.csv", tmp_path / "ready", tmp_path / "go"
    phases = str(Path(PLAIN).with_name("phases_loop.py"))
    waits = tmp_path / "waits.py"  # started (so the first gpudash holds the CSV), it waits for the word
    waits.write_text(
        f"import os, sys, time\nopen({str(ready)!r}, 'w').close()\n"
        f"while not os.path.exists({str(go)!r}):\n    time.sleep(0.05)\n"
        f"sys.argv = [{phases!r}, '--steps', '3', '--step-s', '0.05']\n"
        f"exec(compile(open({phases!r}).read(), {phases!r}, 'exec'))\n"
    )
    job = [sys.executable, str(waits)]
    first = subprocess.Popen(
        [sys.executable, "-m", "gpudash", "record", str(out), "-q", "--", *job],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not ready.exists():
            assert first.poll() is None, first.communicate()  # it ended: what it said
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert not out.exists()  # held from its start, before the CSV exists
        second = _gpudash("record", str(out), "--force", "-q", "--", *job)
        assert second.returncode == 2
        (line,) = second.stderr.strip().splitlines()
        assert line == (
            f"gpudash: error: {out} is being recorded by another gpudash (pid {first.pid}): wait for it to end, "
            "or record to another file"
        )
    finally:
        go.touch()
        assert first.wait(timeout=120) == 0
    replaced = _gpudash(
        "record", str(out), "--force", "-q", "--", sys.executable, phases, "--steps", "3", "--step-s", "0.05"
    )
    assert replaced.returncode == 0, replaced.stderr[-2000:]
