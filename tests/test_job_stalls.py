"""A hung job (``gpudash record --stall-after``) and the line it waits on: the stall's report names
the rank that stalled first and a process that cannot answer; then real scripts on the CPU — a job
hung on a lock (the ask leaves it as it was), a stall in a DataLoader worker, and torchrun's rank
that stalled named first with the others waiting for it (a job's phases and goodput:
tests/test_job_phases.py)."""

from __future__ import annotations

import csv
import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gpudash.core.protocol import STALLED_PHASE, EventKind, ExitCode
from gpudash.job.stalls import Stall, report, stall_after_s
from tests import printed
from tests.test_job import JOBS, TIMEOUT_S, job_line
from tests.test_job_phases import PHASES_LOOP, csv_rows, record_job, summary_row


def test_a_stall_names_the_rank_that_stalled_first_and_a_process_that_cannot_answer() -> None:
    assert stall_after_s(1.0) == 30.0 and stall_after_s(5.0) == 50.0
    stall = Stall(since=0.0, asked_at=31.0, asked={11: "rank 0", 12: "rank 1"}, first_rank=1)
    stall.answers[12] = {
        "threads": [
            {
                "thread": "MainThread",
                "main": True,
                "user": {"file": "/x/train.py", "line": 41, "function": "main", "text": "dist.all_reduce(t)"},
            },
            {
                "thread": "pin",
                "main": False,
                "inner": {"file": "/usr/lib/threading.py", "line": 320, "function": "wait"},
            },
        ]
    }
    assert not stall.complete(31.5) and stall.complete(34.1)
    line, lines = report(stall, 35.0, 0.5)
    where = "rank 1 (pid 12) MainThread waits at train.py:41 in main: dist.all_reduce(t)"
    assert line == f"no step for 35 s; its steps take 0.5 s: {where}"
    assert lines[-1].startswith("rank 0 (pid 11) did not answer within 3 s: a thread holds the GIL")
    assert "py-spy dump --pid 11" in lines[-1]


def _resumed(stderr: str) -> bool:
    """``record`` said that the job's steps resumed after a stall (a "phase" event's line)."""
    return any(e.text.startswith("steps resumed after a ") for e in printed.event_lines(stderr, "phase"))


def _told(out: Path) -> bool:
    """The recording under way holds a stall told (where the job waits)."""
    if not out.exists():
        return False
    with open(out, newline="") as f:
        return any(row.get("event_kind") == EventKind.STALLED.value for row in csv.DictReader(f))


def _record_stalled(
    tmp_path: Path, name: str, job: tuple[str, ...], then: Callable[[subprocess.Popen[str]], object]
) -> tuple[Path, Any, dict[str, Any]]:
    """``gpudash record --stall-after 3`` of a job that stalls; once the recording holds the stall
    told, ``then(gpudash)`` (release the job, or stop the recording): the CSV, the command's
    output, the sidecar. An event, not a time, moves it on: a loaded machine only makes it late."""
    out = tmp_path / f"{name}.csv"
    command = [sys.executable, "-m", "gpudash", "record", str(out), "--stall-after", "3", "--", sys.executable, *job]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while not _told(out) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        told = _told(out)
        then(proc)
        stdout, stderr = proc.communicate(timeout=TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert told, stderr[-2000:]
    done = subprocess.CompletedProcess(command, proc.returncode, stdout, stderr)
    return out, done, json.loads(out.with_suffix(".json").read_text())


@pytest.mark.slow
def test_a_job_hung_on_a_lock_is_stalled_with_its_line_and_the_ask_leaves_it_as_it_was(tmp_path: Path) -> None:
    go_on = tmp_path / "go-on"  # the lock holds until the stall is told
    job: tuple[str, ...] = (PHASES_LOOP, "--steps", "20", "--step-s", "0.1", "--hang-at", "6", "--hang-s", "0.05")
    job += ("--release-file", str(go_on), "--own-handlers", "--workers", "1")
    out, done, meta = _record_stalled(tmp_path, "hung", job, lambda _: go_on.touch())
    assert done.returncode == 0, done.stderr[-2000:]
    assert "threads changed" not in done.stdout and "signal handlers changed" not in done.stdout
    events = csv_rows(out, "event")
    told = [r for r in events if r["event_kind"] == EventKind.STALLED.value][0]  # (its exit, if slow, may be a 2nd)
    assert "rank 0" in told["event_message"] and "phases_loop.py:" in told["event_message"]
    assert "lock.acquire(timeout=args.hang_s)" in told["event_message"]
    assert any(e.text.startswith("no step for") for e in printed.event_lines(done.stderr, "stalled")), done.stderr
    assert _resumed(done.stderr), done.stderr
    stalled_s = float(told["event_message"].split("no step for ")[1].split(" s")[0])  # when told
    ended = [float(r["event_after"]) for r in events if r["event_what"] == STALLED_PHASE and r["event_after"]]
    assert meta["stalls"] and ended[0] >= max(3.0, stalled_s - 0.5)  # it lasted past its telling
    assert meta["phases"][STALLED_PHASE] >= ended[0]
    mean, _, _ = summary_row(out)  # the step after the stall is the stall's, not a slow step (that would halve it)
    assert mean == pytest.approx(float(job_line(done.stdout)["steps_per_s"]), rel=0.1)


@pytest.mark.slow
def test_a_stall_in_a_dataloader_worker_shows_the_workers_line(tmp_path: Path) -> None:
    job = (PHASES_LOOP, "--steps", "100", "--step-s", "0.05", "--hang-in-worker", "--workers", "2")
    out, done, meta = _record_stalled(tmp_path, "worker", job, lambda gd: gd.send_signal(signal.SIGINT))
    assert done.returncode == ExitCode.INTERRUPTED, done.stderr[-2000:]  # stopped, as Ctrl-C does
    assert [r["event_message"] for r in csv_rows(out, "event") if r["event_kind"] == EventKind.STALLED.value]
    where = "\n".join(line for stall in meta["stalls"] for line in stall["where"])
    assert "DataLoader worker" in where and "in __getitem__: time.sleep(3600)" in where
    assert "rank 0" in where  # and where the training loop waits for it


@pytest.mark.slow
def test_with_torchrun_the_rank_that_stalled_is_named_first_and_the_others_wait_for_it(tmp_path: Path) -> None:
    ddp = str(JOBS / "ddp_loop.py")
    torchrun = ("-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", ddp, "20", "1:10:8")
    out, done, meta = record_job(tmp_path, "ddp", *torchrun, options=("--stall-after", "3"))
    (first, *rest) = meta["stalls"][0]["where"]
    assert first.startswith("rank 1 ") and "ddp_loop.py:" in first and "time.sleep(hang_s)" in first
    assert any(line.startswith("rank 0 ") and "loss.backward()" in line for line in rest)  # in the all-reduce
    assert _resumed(done.stderr), done.stderr
