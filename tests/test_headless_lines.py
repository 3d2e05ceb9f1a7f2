"""gpudash's own lines in a recording (``gpudash.recording.headless_report.say``) beside a job's
progress bar: on a terminal a line starts at the left edge, the bar's unfinished line erased (a
``\\r`` bar drawn again at its next update), never glued after it; in a file or a pipe it is the
plain line."""

from __future__ import annotations

import io
import os
import select
import sys
from pathlib import Path

import pytest

from gpudash.recording.headless_report import say


def screen_lines(raw: bytes) -> list[str]:
    """What a terminal shows of ``raw``: each line as its last carriage return and erase leave it."""
    shown = []
    for line in raw.decode().replace("\r\n", "\n").split("\n"):
        shown.append(line.split("\r")[-1].replace("\x1b[K", ""))
    return shown


def test_a_line_on_a_terminal_is_not_glued_after_a_progress_bar(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TERM", "xterm")
    main, side = os.openpty()
    terminal = io.TextIOWrapper(io.FileIO(side, "w", closefd=False), write_through=True)
    monkeypatch.setattr(sys, "stderr", terminal)
    terminal.write(" 45%|████▌     | 450/1000 [00:04<00:05]")  # the job's bar: no newline yet
    say("[   10.0s] 31.2 steps/s")
    raw = b""
    while b"\n" not in raw and select.select([main], [], [], 10.0)[0]:  # a pty hands output on as it can
        raw += os.read(main, 4096)
    os.close(main)
    os.close(side)
    assert screen_lines(raw)[:2] == ["gpudash: [   10.0s] 31.2 steps/s", ""]


def test_a_line_in_a_file_is_the_plain_line(capsys: pytest.CaptureFixture[str]) -> None:
    say("3 rows in run.csv")
    assert capsys.readouterr().err == "gpudash: 3 rows in run.csv\n"


def test_record_says_it_is_waiting_before_a_job_that_prepares_for_long_has_taken_a_step(tmp_path: Path) -> None:
    """A job's data preparation may take minutes before its first step: ``record`` says at once what
    it records and where, before anything of the job's, and the rest of its lines once it steps."""
    from tests.test_job import gpudash

    job = tmp_path / "prepares.py"
    job.write_text("import sys\nprint('JOB preparing', file=sys.stderr, flush=True)\n")
    done = gpudash("record", str(tmp_path / "run.csv"), "--", sys.executable, str(job))
    lines = done.stderr.splitlines()
    first = lines[0]
    assert first.startswith("gpudash: recording job:prepares.py (") and first.endswith(
        f"to {tmp_path / 'run.csv'} from its first step"
    ), done.stderr
    assert lines.index("JOB preparing") > 0 and done.returncode == 0, done.stderr
