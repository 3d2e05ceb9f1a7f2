"""``gpudash record``'s Ctrl-C: the first says at once that it stops after the current step, the
second forces. A workload stuck in its step (``GPUDASH_FAULT=hang@step=N``) stands in for a
7.5 s step: the first line must come while the step is still running."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from gpudash.core import faults
from tests.helpers import GPUDASH

ROOT = Path(__file__).resolve().parent.parent
STOPPING = "gpudash: stopping after the current step (Ctrl-C again to force)"


def wait_for(cond, what: str, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < deadline, f"no {what} after {timeout_s:g} s"
        time.sleep(0.05)


@pytest.mark.slow
def test_the_first_ctrl_c_says_it_stops_after_the_step_and_the_second_forces(tmp_path: Path) -> None:
    env = {**os.environ, faults.ENV: "hang@step=3"}
    proc = subprocess.Popen(
        [
            *GPUDASH,
            "record",
            "run.csv",
            "--device",
            "cpu",
            "-w",
            "sync_loss",
            "--image-size",
            "16",
            "--watchdog",
            "600",
        ],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []
    stderr = proc.stderr
    assert stderr is not None  # stderr=PIPE
    reader = threading.Thread(target=lambda: lines.extend(iter(stderr.readline, "")), daemon=True)
    reader.start()
    try:
        log = tmp_path / "run.log"
        wait_for(lambda: log.exists() and "hanging at step 3" in log.read_text(), "hung workload")
        proc.send_signal(signal.SIGINT)  # as Ctrl-C would (the workload process is in its own group)
        wait_for(lambda: any(STOPPING in line for line in lines), "'stopping…' line")
        assert proc.poll() is None  # said while the step (stuck here) is still running
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 130
    finally:
        proc.kill()
        reader.join(timeout=10)
    text = "".join(lines)
    assert "gpudash: forced: terminating the workload now" in text
    assert text.index(STOPPING) < text.index("forced") < text.index("interrupted")
    assert "Traceback" not in text
