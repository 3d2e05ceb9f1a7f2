"""A job's step records are data from another process, checked before they count: placed on
gpudash's clock by the offset measured at the process's first step (a job in a time namespace of
its own reads as any other), and dropped with one note when a number is not finite or in bounds, a
time lies outside the run or a step comes again — never an endless loop (issue 54, items 10 and 11)."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import pytest

from gpudash.boot.gpudash_boot import syncs
from gpudash.core.protocol import Event, EventKind, RunConfig
from gpudash.job.session import JobSession
from gpudash.job.step_record import StepRecord
from tests.helpers import checkout_first_on_path


def _session(tmp_path: Path) -> JobSession:
    """A job's session, its process never started: the test speaks for the job."""
    session = JobSession(RunConfig(workload="job:train.py", job=("python", str(tmp_path / "train.py"))))
    return session


def _record(step: int, t: float, train_s: float | None = 0.1) -> list[Any]:
    return [step, t, None, 8, 0, 0.0, None, 0, train_s]


@pytest.mark.parametrize(
    "bad",
    [
        _record(1, -1e308),
        _record(1, math.inf),
        _record(1, 1e300),
        [1, "soon", None, 8, 0, 0.0, None, 0, 0.1],
        [-5, 1.0, None, 8, 0, 0.0, None, 0, 0.1],
        [1, 1.0, -3.0, 8, 0, 0.0, None, 0, 0.1],
        [1, 1.0, None, 10**30, 0, 0.0, None, 0, 0.1],
        [1, 1.0, None, 8, 0, math.nan, None, 0, 0.1],
        "not a record",
        [1],
    ],
)
def test_a_record_that_is_not_one_is_refused_by_the_parser(bad: Any) -> None:
    assert StepRecord.parse(bad) is None


def test_forged_records_are_dropped_with_one_note_and_never_hang_the_session(tmp_path: Path) -> None:
    session = _session(tmp_path)
    try:
        now = time.monotonic()
        session.from_hooks.on_message({"k": "first", "rank": 0, "pid": 1, "mono": now, "world": 1}, now)
        good = [_record(i, now + 0.01 * i) for i in range(1, 6)]
        forged = [_record(6, -1e308), _record(7, 1e308), _record(3, now + 0.1), [8, math.nan], "x"]
        session.from_hooks.on_message({"k": "steps", "rank": 0, "s": [*good, *forged]}, now + 0.1)
        session.from_hooks.on_message({"k": "steps", "rank": 0, "s": "not a list"}, now + 0.1)
        assert session.samples.steps == 5  # the good ones, and nothing else
        started = time.process_time()  # this process's CPU time: a busy machine does not lengthen it
        out = session.samples.due(now + 5.0)  # windows from the first step's time, not from 1e-308
        assert time.process_time() - started < 1.0 and all(0 <= s.time_s < 10 for s in out)
        notes = [m for m in session.out.messages if isinstance(m, Event) and m.kind == EventKind.ERROR]
        assert len(notes) == 1 and "rank 0 sent a step record that is not one: dropped" in notes[0].message
    finally:
        session.channel.close()


def test_a_job_on_another_monotonic_clock_is_placed_on_gpudashs(tmp_path: Path) -> None:
    """A process in a time namespace (``unshare -T --monotonic -3700``) reads its clock an hour
    behind: its records keep their spacing and land at the run's own times."""
    session = _session(tmp_path)
    try:
        now = time.monotonic()
        skew = -3700.0
        session.from_hooks.on_message({"k": "first", "rank": 0, "pid": 1, "mono": now + skew, "world": 1}, now)
        records = [_record(i, now + skew + 0.1 * i) for i in range(1, 21)]
        session.from_hooks.on_message({"k": "steps", "rank": 0, "s": records}, now + 2.0)
        assert session.samples.steps == 20
        out = session.samples.due(now + 2.5)
        assert out and all(0 <= s.time_s <= 3.0 for s in out)
        assert out[-1].steps_per_s == pytest.approx(10.0)
        session.from_hooks.on_message(
            {"k": "phase", "rank": 0, "kind": "evaluation", "t0": now + skew + 2.1, "open": 1}, now
        )
        assert session.phases.open["evaluation"] == pytest.approx(now + 2.1)
    finally:
        session.channel.close()


@pytest.fixture(scope="module")
def escaped_to_stdout(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """``gpudash record - -- python 'tr\\x1b[31main.py' …``: a script whose name holds an escape
    sequence, recorded to stdout (not quiet): gpudash's run."""
    import shutil
    import sys

    from tests.helpers import once_per_session
    from tests.test_job import JOBS, gpudash

    def record() -> Any:
        script = tmp_path_factory.mktemp("escaped") / "tr\x1b[31main.py"
        shutil.copy(JOBS / "phases_loop.py", script)
        done = gpudash("record", "-", "--", sys.executable, str(script), "--steps", "12", "--step-s", "0.05")
        assert done.returncode == 0, done.stderr[-2000:]
        return done

    return once_per_session(tmp_path_factory, "test_job_clock-escaped", record)  # its tests may run in two workers


@pytest.mark.slow
def test_record_to_stdout_keeps_the_jobs_own_stdout_out_of_the_csv(escaped_to_stdout: Any) -> None:
    """``gpudash record - -- CMD``: the CSV alone on stdout, the job's prints on stderr (issue 54, item 7)."""
    import csv
    import io

    done = escaped_to_stdout
    rows = list(csv.reader(io.StringIO(done.stdout)))
    assert rows[0][:2] == ["row_kind", "time_s"] and all(len(r) == len(rows[0]) for r in rows)
    assert "JOB steps=12" not in done.stdout and "JOB steps=12" in done.stderr


@pytest.mark.slow
@pytest.mark.parametrize("name", ["report", "tune"])
def test_a_recording_named_like_a_command_is_a_path(tmp_path: Path, name: str) -> None:
    """``gpudash record report -- CMD`` records to a file named ``report`` (issue 54, item 15)."""
    import os
    import subprocess
    import sys

    from tests.test_job import JOBS

    job = [sys.executable, str(JOBS / "phases_loop.py"), "--steps", "8", "--step-s", "0.05"]
    done = subprocess.run(
        [sys.executable, "-m", "gpudash", "record", name, "-q", "--", *job],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": checkout_first_on_path()},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / name).read_text().startswith("row_kind,time_s,")


@pytest.mark.slow
def test_escape_sequences_in_a_jobs_command_line_are_shown_escaped(escaped_to_stdout: Any) -> None:
    """A script's name or argument holding an escape sequence never reaches the terminal or the CSV
    as it is (issue 54, item 21): ``$'…'`` quoting, as bash writes it."""
    done = escaped_to_stdout
    assert "\x1b" not in done.stderr and "\x1b" not in done.stdout  # stdout: the CSV
    assert "job:tr\\x1b[31main.py" in done.stderr and "$'" in done.stderr


# -- the job's own warnings filters and sync debug mode (issue 54, items 2 and 3) ------------------------
def job_parts(monkeypatch: pytest.MonkeyPatch, mode: int = 0) -> tuple[Any, list[object], list[str]]:
    """The hooks' parts as the bootstrap loads them, the sync debug mode kept here (it needs a CUDA
    driver: faked at torch's boundary), and what reaches the job's own warning handler."""
    import warnings

    import torch

    parts = syncs
    modes: list[object] = []
    monkeypatch.setattr(torch.cuda, "get_sync_debug_mode", lambda: mode)
    monkeypatch.setattr(torch.cuda, "set_sync_debug_mode", modes.append)
    shown: list[str] = []
    monkeypatch.setattr(warnings, "showwarning", lambda message, *rest, **kw: shown.append(str(message)))
    return parts, modes, shown


SYNC = "called a synchronizing CUDA operation"


def test_a_jobs_error_filter_never_turns_a_counted_sync_into_an_exception(monkeypatch: pytest.MonkeyPatch) -> None:
    import warnings

    import torch

    parts, _, shown = job_parts(monkeypatch)
    with warnings.catch_warnings():
        count = parts.SyncCount(torch)
        try:
            with warnings.catch_warnings():  # the job's own block, as it writes it
                warnings.simplefilter("error")
                warnings.warn(SYNC, UserWarning, stacklevel=1)  # torch's warning at a sync: no exception
                with pytest.raises(UserWarning):
                    warnings.warn("the job's own warning", UserWarning, stacklevel=1)  # its filter still holds
            warnings.resetwarnings()
            warnings.filterwarnings("error", message=".*synchronizing")
            warnings.warn(SYNC, UserWarning, stacklevel=1)
            assert count.count == 2 and shown == []  # counted, never printed into the job
        finally:
            count.close()
    assert warnings.simplefilter.__module__ == "warnings"  # the job's functions back as they were


def test_a_job_that_sets_the_sync_debug_mode_keeps_it_and_nothing_is_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    import warnings

    import torch

    parts, modes, _ = job_parts(monkeypatch, mode=2)  # set to "error" before its first step
    count = parts.SyncCount(torch)
    assert count.job_owns_mode and "the job sets torch.cuda.set_sync_debug_mode itself" in count.not_counted
    count.close()
    assert modes == []  # never changed
    parts, modes, shown = job_parts(monkeypatch)
    with warnings.catch_warnings():
        count = parts.SyncCount(torch)
        try:
            torch.cuda.set_sync_debug_mode("warn")  # the job's own, after its first step
            warnings.warn(SYNC, UserWarning, stacklevel=1)
            assert count.count == 0 and shown == [SYNC] and count.not_counted  # the job's warning is the job's
        finally:
            count.close()
    assert modes == ["warn", "warn"]  # gpudash's, then the job's; the job's stays at the end


@pytest.mark.slow
def test_hooks_that_go_off_in_a_job_without_stderr_never_crash_it_and_the_end_says_what_happened(
    tmp_path: Path,
) -> None:
    """Issue 54, items 4 and 14: with its fd 2 closed, the hooks' one line fails to print and the job
    goes on (the note reaches gpudash over the channel); the end says the hooks went off, not that
    the job never stepped."""
    import sys

    from tests.test_job import JOBS, gpudash

    plain = str(JOBS / "plain_loop.py")
    job = tmp_path / "closes_stderr.py"  # its stderr closed once it runs, as a daemonised job's is
    job.write_text(
        "import os, sys\n"
        "os.close(2)\n"
        f"sys.argv = [{plain!r}, '--odd-batches', '--workers', '0', '--steps', '30']\n"
        f"exec(compile(open({plain!r}).read(), {plain!r}, 'exec'))\n"
    )
    done = gpudash("record", str(tmp_path / "r.csv"), "-q", "--", sys.executable, str(job))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "JOB steps=30" in done.stdout  # the job ran to its end
    (end,) = [line for line in done.stderr.splitlines() if "nothing recorded" in line]
    assert end == (
        "gpudash: the job exited with code 0; gpudash's hooks in it went off after 0 steps "
        "(reading a batch: RuntimeError: no attributes here): nothing recorded"
    )


@pytest.mark.parametrize(
    ("make", "code", "says"),
    [
        ("directory", 126, "{path}: is a directory"),
        ("garbage", 126, "cannot run {path}: Exec format error (exit status 126)"),
        ("shebang", 127, "cannot run {path}: required file not found (its #! interpreter?) (exit status 127)"),
    ],
)
def test_a_command_that_cannot_be_run_is_one_line_with_the_reason_and_the_shells_status(
    tmp_path: Path, make: str, code: int, says: str
) -> None:
    """Issue 54, item 13: as bash says it, in one line (``record`` and ``diagnose`` alike)."""
    from tests.test_job import gpudash

    path = tmp_path / make
    if make == "directory":
        path.mkdir()
    else:
        path.write_bytes(b"\x00\x01\x02garbage" if make == "garbage" else b"#!/nonexistent/python\nprint(1)\n")
        path.chmod(0o755)
    for command in (["record", str(tmp_path / "r.csv")], ["diagnose", "-q"]):
        done = gpudash(*command, "--", str(path))
        assert done.returncode == code
        assert done.stderr.strip().splitlines() == [f"gpudash: error: {says.format(path=path)}"]


def test_headless_the_jobs_output_buffering_is_its_own_and_the_pane_gets_lines_as_they_come() -> None:
    """Issue 54, item 18: ``PYTHONUNBUFFERED`` is not forced on a recorded job (its stdout and
    stderr interleave, and a flood into a file runs, as they do bare); the dashboard's pane asks for it."""
    import os

    from gpudash.job.launch import job_env

    bare = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    assert "PYTHONUNBUFFERED" not in job_env("/x.sock", bare)
    assert job_env("/x.sock", bare, unbuffered=True)["PYTHONUNBUFFERED"] == "1"
    assert job_env("/x.sock", {**bare, "PYTHONUNBUFFERED": ""}, unbuffered=True)["PYTHONUNBUFFERED"] == ""  # the user's


def test_a_long_output_line_is_cut_visibly_and_its_memory_bounded() -> None:
    """Issue 54, item 17: a 60,000-character line keeps its beginning, says what was cut."""
    from gpudash.job.output import MAX_LINE, cut, safe_line

    line = "x" * 60_000
    shown = safe_line(cut(line))
    assert shown.startswith("x" * MAX_LINE) and shown.endswith(f"[{60_000 - MAX_LINE:,} more characters not shown]")
    assert len(shown) < MAX_LINE + 64 and cut("short") == "short"


def test_a_second_training_in_a_row_is_not_taken_for_repeated_steps(tmp_path: Path) -> None:
    """A shell script that trains twice: the second process's steps start at 1 again, and count."""
    session = _session(tmp_path)
    try:
        now = time.monotonic()
        session.from_hooks.on_message({"k": "first", "rank": 0, "pid": 1, "mono": now, "world": 1}, now)
        session.from_hooks.on_message(
            {"k": "steps", "rank": 0, "s": [_record(i, now + 0.01 * i) for i in range(1, 6)]}, now
        )
        session.from_hooks.on_message({"k": "first", "rank": 0, "pid": 2, "mono": now + 0.1, "world": 1}, now + 0.1)
        again = [_record(i, now + 0.1 + 0.01 * i) for i in range(1, 4)]
        session.from_hooks.on_message({"k": "steps", "rank": 0, "s": again}, now + 0.2)
        assert not [m for m in session.out.messages if isinstance(m, Event) and m.kind == EventKind.ERROR]
        assert len(session.samples.ranks[0].window) == 8  # every step of both, none dropped
    finally:
        session.channel.close()


def test_two_trainings_in_a_row_add_up_and_say_so(tmp_path: Path) -> None:
    """Issue 54, item 9: a shell script's second training goes on from the first's count (the sum),
    so ``--steps`` and the recording count both; how they were combined is said."""
    from gpudash.job.step_intake import IN_SEQUENCE

    session = _session(tmp_path)
    try:
        now = time.monotonic()
        session.from_hooks.on_message({"k": "first", "rank": 0, "pid": 11, "mono": now, "world": 1}, now)
        first = [_record(i, now + 0.01 * i) for i in range(1, 401)]
        session.from_hooks.on_message({"k": "steps", "rank": 0, "pid": 11, "s": first}, now + 4.0)
        later = now + 10.0
        session.from_hooks.on_message({"k": "first", "rank": 0, "pid": 12, "mono": later, "world": 1}, later)
        second = [_record(i, later + 0.01 * i) for i in range(1, 101)]
        session.from_hooks.on_message({"k": "steps", "rank": 0, "pid": 12, "s": second}, later + 1.0)
        assert session.samples.steps == 500
        assert session.intake.combined() == IN_SEQUENCE
        said = [m for m in session.out.messages if isinstance(m, Event) and m.what == "processes"]
        assert said and "after 400 steps" in said[0].message
        assert {p["pid"]: p["steps"] for p in session.intake.as_list()} == {11: 400, 12: 100}
    finally:
        session.channel.close()


def test_processes_stepping_at_once_as_one_rank_count_in_all_and_each_apart(tmp_path: Path) -> None:
    """Hogwild: two processes step the shared model at 10 steps/s each; the run steps 20 a second,
    its steps are both's, and each process's steps are kept apart."""
    from gpudash.job.step_intake import AT_ONCE

    session = _session(tmp_path)
    try:
        now = time.monotonic()
        for pid in (21, 22):
            session.from_hooks.on_message({"k": "first", "rank": 0, "pid": pid, "mono": now, "world": 1}, now)
        for pid, lag in ((21, 0.0), (22, 0.05)):
            records = [_record(i, now + lag + 0.1 * i) for i in range(1, 31)]
            session.from_hooks.on_message({"k": "steps", "rank": 0, "pid": pid, "s": records}, now + 3.2)
        assert session.samples.steps == 60
        out = session.samples.due(now + 3.6)
        assert len(out) >= 3 and all(s.steps_per_s == pytest.approx(20.0) for s in out)
        assert session.intake.combined() == AT_ONCE
        assert {p["pid"]: p["steps"] for p in session.intake.as_list()} == {21: 30, 22: 30}
        said = [m for m in session.out.messages if isinstance(m, Event) and m.what == "processes"]
        assert said and "steps too" in said[0].message
    finally:
        session.channel.close()
