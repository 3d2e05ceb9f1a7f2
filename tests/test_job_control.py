"""The job under ``gpudash record`` is a foreground job of the user's terminal, as it is bare: it
may set the terminal's modes, Ctrl-Z suspends it with gpudash and ``fg`` goes on, a job stopped
by something else is said at once, and what a job leaves running when it ends by itself lives on
(issue 54, items 1, 8 and 19). Driven from an interactive bash in a pseudo-terminal, as a user types;
tests that read one run share it (module-scoped fixtures)."""

from __future__ import annotations

import csv
import os
import pty
import re
import select
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gpudash.job.suspended import JobStops
from tests.helpers import checkout_first_on_path, once_per_session
from tests.test_job import JOBS

TTY_LOOP = JOBS / "tty_loop.py"


class Shell:
    """An interactive bash in a pseudo-terminal: ``type`` a line or a key, ``expect`` its output."""

    def __init__(self, cwd: Path) -> None:
        env = {
            **os.environ,
            "PS1": "$ ",
            "PYTHONPATH": checkout_first_on_path(),
            "TERM": "dumb",
            "HISTFILE": "/dev/null",
        }
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: a login-less interactive shell
            os.chdir(cwd)
            os.execvpe("bash", ["bash", "--norc", "--noprofile", "-i"], env)
        self.seen = ""

    def type(self, text: str) -> None:
        os.write(self.fd, text.encode())

    def expect(self, pattern: str, timeout: float = 90.0) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while (found := re.search(pattern, self.seen)) is None:
            left = deadline - time.monotonic()
            if left <= 0:
                pytest.fail(f"no {pattern!r} in the terminal after {timeout:.0f} s:\n{self.seen[-3000:]}")
            ready, _, _ = select.select([self.fd], [], [], min(left, 0.5))
            if ready:
                try:
                    self.seen += os.read(self.fd, 65536).decode(errors="replace")
                except OSError:
                    pytest.fail(f"the terminal closed:\n{self.seen[-3000:]}")
        return found

    def close(self) -> None:
        os.kill(self.pid, signal.SIGKILL)
        os.waitpid(self.pid, 0)
        os.close(self.fd)


def _record(job_args: str, csv_name: str = "r.csv", *, then_status: bool = True) -> str:
    status = "; echo EXIT=$?" if then_status else ""
    return f"{sys.executable} -m gpudash record {csv_name} -q -- {sys.executable} {TTY_LOOP} {job_args}{status}\n"


def _state(pid: int) -> str:
    """A process's state letter (``T``: stopped)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def _wait_for(test: object, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not test():  # type: ignore[operator]
        if time.monotonic() > deadline:
            pytest.fail("timed out")
        time.sleep(0.05)


@dataclass(frozen=True)
class TtyRun:
    """A recording in a terminal: what the terminal showed, the job's state while Ctrl-Z held it, the CSV."""

    seen: str
    state: str
    rows: list[dict[str, str]]


@pytest.fixture(scope="module")
def in_a_terminal(tmp_path_factory: pytest.TempPathFactory) -> TtyRun:
    """In an interactive bash, ``stty tostop``, then a recording of a job that sets its terminal's
    modes and prints each of its 60 steps; Ctrl-Z at its 20th step, 2.5 s stopped, then ``fg``."""

    def run() -> TtyRun:
        tmp = tmp_path_factory.mktemp("tty")
        pid_file = tmp / "job.pid"
        sh = Shell(tmp)
        try:
            sh.expect(r"\$ ")
            sh.type("stty tostop\n")
            sh.expect(r"\$ ")
            sh.type(_record(f"--steps 60 --step-s 0.05 --tcsetattr --pid-file {pid_file}", then_status=False))
            sh.expect(r"step 20\r?\n")
            sh.type("\x1a")  # Ctrl-Z
            sh.expect(r"Stopped")
            state = _state(int(pid_file.read_text()))
            time.sleep(2.5)  # long enough for windows of nothing
            sh.type("fg\n")
            sh.expect(r"JOB done")
            sh.type("echo EXIT=$?\n")
            sh.expect(r"EXIT=\d+")
            seen = sh.seen
        finally:
            sh.close()
        return TtyRun(seen, state, list(csv.DictReader((tmp / "r.csv").open())))

    return once_per_session(tmp_path_factory, "test_job_control-tty", run)  # its tests may run in two workers


@pytest.mark.slow
def test_a_job_that_sets_its_terminals_modes_runs_to_its_end_as_it_does_bare(in_a_terminal: TtyRun) -> None:
    """Item 1: ``termios.tcsetattr(1, …)`` from a background group is stopped by SIGTTOU for ever;
    the job is the terminal's foreground job instead."""
    seen = in_a_terminal.seen
    assert "JOB done steps=60" in seen and "EXIT=0" in seen, seen[-2000:]


@pytest.mark.slow
def test_a_job_writing_under_stty_tostop_runs_to_its_end(in_a_terminal: TtyRun) -> None:
    """Under ``stty tostop`` a write from a background group is stopped by SIGTTOU: the job writes a
    line each step, before Ctrl-Z and after ``fg``."""
    seen = in_a_terminal.seen
    assert "JOB done steps=60" in seen and "EXIT=0" in seen, seen[-2000:]
    assert all(f"step {n}\r\n" in seen for n in (1, 20, 21, 60)), seen[-2000:]


@pytest.mark.slow
def test_ctrl_z_suspends_the_job_with_gpudash_and_fg_goes_on_without_a_zero_in_the_recording(
    in_a_terminal: TtyRun,
) -> None:
    """Item 8: Ctrl-Z stops the job (the terminal's foreground) and gpudash with it, so the shell
    says its job is stopped; ``fg`` continues both; the stopped time is the "suspended" phase, no
    window of it reads zero steps/s, and every step is counted."""
    assert in_a_terminal.state == "T"  # the job is stopped, not training on unseen
    assert "EXIT=0" in in_a_terminal.seen and "JOB done steps=60" in in_a_terminal.seen, in_a_terminal.seen[-2000:]
    rows = in_a_terminal.rows
    suspended = [r for r in rows if r["row_kind"] == "event" and r["event_what"] == "suspended"]
    assert len(suspended) == 2 and float(suspended[1]["event_after"]) >= 2.0  # went, and came back 2.5 s later
    stopped_from, stopped_to = float(suspended[0]["time_s"]), float(suspended[1]["time_s"])
    samples = [r for r in rows if r["row_kind"] == "sample"]
    assert max(int(r["steps"]) for r in samples) == 60
    inside = [r for r in samples if stopped_from + 1.0 < float(r["time_s"]) < stopped_to - 0.5]
    assert not [r for r in inside if float(r["steps_per_s"] or 0) == 0.0]


@pytest.fixture(scope="module")
def stopped_by_someone_else(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, str, Path, int]:
    """A recording (no terminal) of a job of 60 steps that starts a helper in its group: ``kill -STOP``
    of the job at its 3rd step, ``kill -CONT`` once gpudash has said so; it then ends by itself.
    gpudash's exit status and stderr, the CSV, the helper's pid."""
    import subprocess

    def run() -> tuple[int, str, Path, int]:
        tmp = tmp_path_factory.mktemp("stopped")
        pid_file, helper_file = tmp / "job.pid", tmp / "helper.pid"
        cmd = [sys.executable, "-m", "gpudash", "record", str(tmp / "r.csv"), "--", sys.executable, str(TTY_LOOP)]
        proc = subprocess.Popen(
            [*cmd, "--steps", "60", "--pid-file", str(pid_file), "--helper-file", str(helper_file)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": checkout_first_on_path()},
        )
        try:
            assert proc.stdout is not None and proc.stderr is not None
            while "step 3" not in (line := proc.stdout.readline()):  # training
                assert line, proc.communicate()
            job = int(pid_file.read_text())
            os.kill(job, signal.SIGSTOP)
            while "SIGSTOP" not in (line := proc.stderr.readline()):  # said while it is stopped
                assert line, proc.communicate()
            os.kill(job, signal.SIGCONT)
            _, err = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
        return proc.returncode, err, tmp / "r.csv", int(helper_file.read_text())

    return once_per_session(tmp_path_factory, "test_job_control-stopped", run)  # its tests may run in two workers


@pytest.mark.slow
def test_a_job_stopped_by_someone_else_is_said_at_once_and_counted_as_suspended(
    stopped_by_someone_else: tuple[int, str, Path, int],
) -> None:
    """A stopped job never makes gpudash wait silently: ``kill -STOP`` of the job is said while it
    is stopped, and its stopped time is not a stall."""
    code, err, path, _ = stopped_by_someone_else
    assert code == 0, err[-2000:]
    rows = list(csv.DictReader(path.open()))
    said = [r for r in rows if r["event_what"] == "job" and "SIGSTOP" in r["event_message"]]
    assert said and "kill -CONT" in said[0]["event_message"]
    assert [r for r in rows if r["event_what"] == "suspended" and r["event_after"]]


@pytest.mark.slow
def test_what_a_job_leaves_running_when_it_ends_by_itself_lives_on(
    stopped_by_someone_else: tuple[int, str, Path, int],
) -> None:
    """Item 19: a helper in the job's group outlives the job bare, and under gpudash too."""
    code, err, _, helper = stopped_by_someone_else
    assert code == 0, err[-2000:]
    time.sleep(1.0)  # the reaper's time, had it been told to end the group
    try:
        assert _state(helper) in "SR"  # alive, as bare
    finally:
        os.kill(helper, signal.SIGKILL)


def test_the_stops_class_is_what_the_session_uses() -> None:
    """The session's stops are the ones the headless signals drive (a signature change breaks here)."""
    from gpudash.core.protocol import RunConfig
    from gpudash.job.session import JobSession

    session = JobSession(RunConfig(workload="job:x", job=("true",)))
    try:
        assert isinstance(session.stops, JobStops)
        session.stops.suspend()  # no job yet: nothing to suspend, and no hang
        session.stops.check(time.monotonic())
    finally:
        session.channel.close()


@pytest.mark.slow
def test_a_script_of_two_trainings_is_counted_as_the_sum_and_steps_stops_it_in_the_second(tmp_path: Path) -> None:
    """Item 9: ``--steps 30`` over two trainings of 20 in a row stops the second at its 10th step;
    run.json keeps each process's steps and says how they were combined."""
    import json
    import subprocess

    script = tmp_path / "two.sh"
    script.write_text(f"#!/bin/sh\n{sys.executable} {TTY_LOOP} --steps 20\n{sys.executable} {TTY_LOOP} --steps 20\n")
    script.chmod(0o755)
    done = subprocess.run(
        [sys.executable, "-m", "gpudash", "record", str(tmp_path / "r.csv"), "--steps", "30", "-q", "--", str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": checkout_first_on_path()},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.count("JOB done") == 1  # the second never got to its end
    meta = json.loads((tmp_path / "r.json").read_text())
    assert meta["steps_combined"] == "one after the other"
    assert [p["steps"] for p in meta["processes"]][0] == 20 and len(meta["processes"]) == 2
    rows = [r for r in csv.DictReader((tmp_path / "r.csv").open()) if r["row_kind"] == "sample"]
    assert max(int(r["steps"]) for r in rows) == 30


def _run_captured(job: list[str], seconds: float = 60.0, watch: object = None) -> Any:
    """A job under the dashboard's session (its output captured), polled to its end; what each poll
    said is in its ``said``."""
    from gpudash.core.protocol import RunConfig
    from gpudash.job.session import JobSession

    session = JobSession(RunConfig(workload="job:flood", job=tuple(job)), capture=True)
    session.said = []  # type: ignore[attr-defined]
    session.start()
    deadline = time.monotonic() + seconds
    try:
        while not session.finished and time.monotonic() < deadline:
            session.said.extend(session.poll())  # type: ignore[attr-defined]
            if watch is not None:
                watch(session)  # type: ignore[operator]
            time.sleep(0.02)
    finally:
        session.stop(timeout=0)
    return session


def test_a_flood_of_output_keeps_the_capture_file_bounded_and_the_pane_ends_with_the_last_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Item 5: 200 MiB printed as fast as the job can; each time the pane has read, the captured
    file's blocks are within the backlog bound (what was read is freed, what is too far behind is
    skipped and said) — measured right after each read, so that how long a loaded machine keeps the
    reader from running, while the job writes on, does not count — and the pane ends with the job's
    last line."""
    from gpudash.job import output

    monkeypatch.setattr(output, "BACKLOG_MAX", 8 << 20)
    flood = "import sys\nline = 'x' * 1023 + '\\n'\nfor _ in range(200 * 1024): sys.stdout.write(line)\n"
    flood += "print('LAST LINE')\n"
    held: list[int] = []  # the file's blocks, right after each read's bound
    bound = output._Capture.bound

    def bound_and_look(capture: Any, f: Any) -> None:
        before = os.fstat(f.fileno()).st_size
        bound(capture, f)
        after = os.fstat(f.fileno())
        held.append(after.st_blocks * 512 - (after.st_size - before))  # less what came during the look

    monkeypatch.setattr(output._Capture, "bound", bound_and_look)
    session = _run_captured([sys.executable, "-c", flood])
    assert session.exit_code == 0
    _wait_for(lambda: session.output and session.output[-1] == "LAST LINE")
    # the bound and the part read but not yet freed (a hole punched each MiB), a block's rounding
    assert held and max(held) <= (8 + 1 + 1) << 20, f"the capture held {max(held) / 2**20:.0f} MiB after a read"


def test_output_that_cannot_be_captured_is_said_and_the_job_runs_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """Item 5: no room for the captured output (a full $TMPDIR: here, a room the disk cannot have):
    one message, and the job runs to its end."""
    from gpudash.core.protocol import Event, EventKind
    from gpudash.job import launch

    monkeypatch.setattr(launch, "CAPTURE_ROOM", 1 << 62)
    session = _run_captured([sys.executable, "-c", "print('hello')"])
    assert session.exit_code == 0
    said = [e for e in session.said if isinstance(e, Event) and e.kind == EventKind.ERROR and e.what == "output"]
    assert said and "cannot be written in" in said[0].message and "MiB free" in said[0].message
