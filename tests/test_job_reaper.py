"""A SIGKILLed gpudash leaves nothing of a job's run behind (issue 54, items 16 and 20): its reaper
removes the channel's folder, the next gpudash removes a folder whose owner is gone, and a process in
a session of its own, known from its start, ends with the job (the job's records on gpudash's
clock: tests/test_job_clock.py)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest


def _has_sample(path: Path) -> bool:
    """``path`` (a CSV being recorded) holds a sample row."""
    return path.exists() and any(line.startswith("sample,") for line in path.read_text().splitlines())


@pytest.mark.slow
def test_a_killed_recording_leaves_no_folder_behind_and_stale_ones_go_at_the_next_start(short_tmp: Path) -> None:
    """Issue 54, item 16: the reaper removes the channel's folder when gpudash is SIGKILLed; a
    folder of a gpudash that is gone (its owner file names a dead process) is removed by the next one."""
    import os
    import subprocess
    import sys

    from gpudash.job.channel import HostChannel
    from tests.test_job import JOBS

    env = {**os.environ, "TMPDIR": str(short_tmp)}
    job = [sys.executable, str(JOBS / "phases_loop.py"), "--steps", "1000", "--step-s", "0.1"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpudash", "record", str(short_tmp / "r.csv"), "-q", "--", *job],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while not list(short_tmp.glob("gpudash-job-*/host.sock")) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert list(short_tmp.glob("gpudash-job-*"))
    deadline = time.monotonic() + 120
    while not _has_sample(short_tmp / "r.csv") and time.monotonic() < deadline:  # the job runs: it has stepped
        assert proc.poll() is None
        time.sleep(0.1)
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 6
    while list(short_tmp.glob("gpudash-job-*")) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert list(short_tmp.glob("gpudash-job-*")) == []
    stale = short_tmp / "gpudash-job-stale"
    stale.mkdir()
    (stale / "owner").write_text(str(proc.pid))  # gone
    mine = short_tmp / "gpudash-job-live"
    mine.mkdir()
    (mine / "owner").write_text(str(os.getpid()))  # alive
    old = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = str(short_tmp)
    try:
        import tempfile

        tempfile.tempdir = None
        channel = HostChannel()
        channel.close()
    finally:
        if old is None:
            os.environ.pop("TMPDIR")
        else:
            os.environ["TMPDIR"] = old
        tempfile.tempdir = None
    assert not stale.exists() and mine.exists()


@pytest.mark.slow
def test_a_process_in_a_session_of_its_own_is_ended_with_the_job_from_its_start(tmp_path: Path) -> None:
    """Issue 54, item 20: a child in a new session (a torchrun rank, before it imports torch) is
    known to gpudash from its first moment: a SIGKILLed gpudash's reaper ends it too."""
    import os
    import signal
    import subprocess
    import sys

    pid_file = tmp_path / "child.pid"
    child_code = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    job = tmp_path / "job.py"
    job.write_text(
        "import subprocess, sys, time\n"
        f"code = {child_code!r}\n"
        "child = subprocess.Popen([sys.executable, '-c', code], start_new_session=True)\n"
        "time.sleep(60)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpudash", "record", str(tmp_path / "r.csv"), "-q", "--", sys.executable, str(job)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while not (pid_file.exists() and pid_file.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    child = int(pid_file.read_text())  # written by the child itself: its first word (at its interpreter's start)
    time.sleep(1.0)  # has been sent, and now it has reached gpudash; no torch anywhere
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 6
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    os.kill(child, signal.SIGKILL)
    pytest.fail("the child in a session of its own outlived gpudash's death")
