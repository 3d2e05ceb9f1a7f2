"""How a job's run ends (issue 73): what it does after its last step is classified like anything
else — its test pass an evaluation, its save a checkpoint however quick, teardown only from the last
of those to the exit — and a Ctrl-C that comes to gpudash is the job's: passed on at once, said so,
what was recorded kept. ``tests/data/jobs/hand_sgd.py`` through ``gpudash record``, its test pass in both its
``--optimizer`` mode (``torch.optim.SGD``) and its hand-updated one."""

from __future__ import annotations

import csv
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from gpudash.core.protocol import CHECKPOINT, EVALUATION, TEARDOWN, EventKind, ExitCode
from gpudash.recording.interrupt import PASSED_ON
from tests.helpers import GPUDASH
from tests.test_job import JOBS, TIMEOUT_S

HAND_SGD = str(JOBS / "hand_sgd.py")
ONE_THREAD = {"OMP_NUM_THREADS": "1"}


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.slow
@pytest.mark.parametrize("update", [("--optimizer",), ()], ids=["torch.optim", "by-hand"])
def test_a_test_pass_after_the_last_step_is_evaluation_its_save_a_checkpoint_and_teardown_the_rest(
    tmp_path: Path, update: tuple[str, ...]
) -> None:
    """Validation, a save (a few ms), a reload and a test after the last step, as word_language_model
    does: ``evaluation`` and ``checkpoint``, within the job's own time for them; teardown only the
    job's exit after its last line (under 1 s on an idle machine; Python's exit with torch loaded takes
    up to 2 s on this loaded 2-core one, bare as under gpudash: timed here from outside)."""
    out = tmp_path / "r.csv"
    job = (sys.executable, HAND_SGD, *update, "--steps", "1500", "--test-pass", "--test-batches", "3000")
    proc = subprocess.Popen(
        [*GPUDASH, "record", str(out), "--", *job],
        env={**os.environ, **ONE_THREAD},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    stderr: list[str] = []
    assert proc.stdout is not None and proc.stderr is not None
    reader = threading.Thread(target=lambda: stderr.extend(iter(proc.stderr.readline, "")), daemon=True)  # type: ignore[union-attr]
    reader.start()
    stdout, last_line_at = [], time.monotonic()
    for line in proc.stdout:
        stdout.append(line)
        last_line_at = time.monotonic()
    assert proc.wait(timeout=TIMEOUT_S) == 0, "".join(stderr)[-3000:]
    exit_s = time.monotonic() - last_line_at  # the job's exit after its last line, and gpudash's end
    reader.join(timeout=10)
    own = re.search(r"test pass: ([\d.]+) s", "".join(stdout))
    assert own is not None
    meta: dict[str, Any] = json.loads(out.with_suffix(".json").read_text())
    phases = meta["phases"]
    assert phases[EVALUATION] > 0.1 and phases[CHECKPOINT] > 0  # the save, however quick
    assert phases[EVALUATION] + phases[CHECKPOINT] == pytest.approx(float(own.group(1)), rel=0.2, abs=0.05)
    assert phases[TEARDOWN] < 1.0 or phases[TEARDOWN] < exit_s + 0.2, (phases[TEARDOWN], exit_s)
    said = [r["event_message"] for r in _rows(out) if r["event_kind"] == EventKind.PHASE.value]
    assert any(m.startswith("evaluation ") for m in said) and any(m.startswith("checkpoint ") for m in said)
    assert not any("after all" in m for m in said), said
    (teardown,) = [m for m in said if m.startswith("teardown ")]
    assert teardown.endswith("(the evaluation after the last step to the exit)")


def _wait_for(cond: Any, what: str) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while not cond():
        assert time.monotonic() < deadline, f"no {what} after {TIMEOUT_S:g} s"
        time.sleep(0.05)


def _sample_rows(path: Path) -> int:
    if not path.exists():
        return 0
    return sum(1 for r in _rows(path) if r["row_kind"] == "sample")


@pytest.mark.slow
def test_a_ctrl_c_to_gpudash_is_passed_on_to_the_job_and_said_so(tmp_path: Path) -> None:
    """gpudash holds the terminal here (none is handed over): its Ctrl-C goes to the job at once, as
    the job would take it bare (its own KeyboardInterrupt), and gpudash says so — not that it stops
    after the current step — keeping what it recorded; it exits with the job's status."""
    out = tmp_path / "r.csv"
    command = [*GPUDASH, "record", str(out), "--", sys.executable, HAND_SGD, "--optimizer", "--steps", "100000000"]
    proc = subprocess.Popen(
        command, env={**os.environ, **ONE_THREAD}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    lines: list[str] = []
    assert proc.stderr is not None
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stderr.readline, "")), daemon=True)  # type: ignore[union-attr]
    reader.start()
    try:
        _wait_for(lambda: _sample_rows(out) >= 4, "windows recorded")
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        reader.join(timeout=10)
    text = "".join(lines)
    assert code == 128 + signal.SIGINT == ExitCode.INTERRUPTED, text[-3000:]
    assert f"gpudash: {PASSED_ON}" in text and "stopping after the current step" not in text
    assert "KeyboardInterrupt" in text  # the job's own, as bare
    assert text.index(PASSED_ON) < text.index("KeyboardInterrupt")
    stopped = [r["event_message"] for r in _rows(out) if r["event_kind"] == EventKind.STOPPED.value]
    assert stopped == ["the job interrupted (Ctrl-C)"]
    assert re.search(
        rf"gpudash: interrupted by SIGINT: \d+ rows in {re.escape(str(out))} \(\d+ throughput windows", text
    )
