"""No orphans: the workload process's group (its DataLoader workers, its resource tracker) is
gone when gpudash exits, whatever ended the run (issue 11, failure 4).

Each test runs ``gpudash --record`` on the CPU in a subprocess and looks at the group with
``ps``, not with gpudash's own code. The group must be empty when gpudash has exited: gpudash
waits for it (the issue allows 1 s; waiting makes the check exact).
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from gpudash.protocol import Event, EventKind, RunConfig
from gpudash.runner import WorkloadRunner

# small and quick on the CPU; input_pipeline's baseline starts 4 DataLoader workers, augment's cpu 2
FAMILIES = {
    "encdec": ["--image-size", "16"],
    "augment": ["--image-size", "16", "-v", "cpu"],
    "sync_loss": ["--image-size", "16"],
    "input_pipeline": ["--image-size", "16", "-v", "baseline"],
}
START_TIMEOUT_S = 180  # a generous bound on torch's import on a busy 2-core machine
EXIT_TIMEOUT_S = 60


def _ps() -> list[tuple[int, int, int, str]]:
    """(pid, ppid, pgid, state) of every process."""
    out = subprocess.run(["ps", "-e", "-o", "pid=,ppid=,pgid=,stat="], capture_output=True, text=True, check=True)
    rows = []
    for line in out.stdout.splitlines():
        pid, ppid, pgid, state = line.split()[:4]
        rows.append((int(pid), int(ppid), int(pgid), state))
    return rows


def live_group(pgid: int) -> list[int]:
    """Processes of group ``pgid`` that are not zombies."""
    return [pid for pid, _, group, state in _ps() if group == pgid and not state.startswith("Z")]


def workload_pid(gpudash_pid: int) -> int:
    """The workload process: gpudash's child that leads its own group."""
    leaders = [pid for pid, ppid, pgid, _ in _ps() if ppid == gpudash_pid and pgid == pid]
    assert len(leaders) == 1, f"expected one workload process under {gpudash_pid}, found {leaders}"
    return leaders[0]


class Recording:
    """``gpudash --record`` in a subprocess, its stderr read line by line."""

    def __init__(self, argv: list[str], env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "gpudash", *argv], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True, env=env)
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.put(line)
        self.lines.put(None)

    def wait_for(self, text: str) -> None:
        while True:
            try:
                line = self.lines.get(timeout=START_TIMEOUT_S)
            except queue.Empty:
                pytest.fail(f"no {text!r} from gpudash: {''.join(self.seen)}")
            if line is None:
                pytest.fail(f"gpudash ended before {text!r}: {''.join(self.seen)}")
            self.seen.append(line)
            if text in line:
                return

    def wait(self) -> int:
        code = self.proc.wait(timeout=EXIT_TIMEOUT_S)
        while (line := self.lines.get(timeout=EXIT_TIMEOUT_S)) is not None:
            self.seen.append(line)
        return code


def start_recording(tmp_path: Path, family: str, extra: list[str] = (), csv: str | None = None,
                    env: dict[str, str] | None = None) -> tuple[Recording, int]:
    """A recording of ``family`` that has started; (it, the workload's group id)."""
    out = csv or str(tmp_path / "run.csv")
    rec = Recording(["--record", out, "-w", family, "--device", "cpu", *FAMILIES[family], *extra], env)
    rec.wait_for("] started")
    group = workload_pid(rec.proc.pid)
    if family in ("input_pipeline", "augment"):
        assert len(live_group(group)) > 1, "the DataLoader workers should be running"
    return rec, group


@pytest.mark.parametrize("family", list(FAMILIES))
def test_killing_the_workload_process_leaves_no_process_of_its_group(tmp_path: Path, family: str) -> None:
    rec, group = start_recording(tmp_path, family)
    os.kill(group, signal.SIGKILL)
    assert rec.wait() == 1  # the workload failed
    assert "killed by SIGKILL" in "".join(rec.seen)
    assert live_group(group) == []


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_signal_to_gpudash_ends_the_group_and_removes_the_empty_temporary_log(tmp_path: Path, sig: int) -> None:
    """``--record -`` logs the workload to gpudash-PID-child.log in the temp dir: gone afterwards."""
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    rec, group = start_recording(tmp_path, "input_pipeline", csv="-", env=env)
    rec.proc.send_signal(sig)
    assert rec.wait() == 130
    assert live_group(group) == []
    assert list(tmp_path.glob("gpudash-*-child.log")) == []


def test_a_finished_run_leaves_no_process_of_its_group(tmp_path: Path) -> None:
    rec, group = start_recording(tmp_path, "input_pipeline", ["--steps", "3"])
    assert rec.wait() == 0
    assert live_group(group) == []


def test_a_crashed_workload_leaves_no_process_of_its_group(tmp_path: Path) -> None:
    env = {**os.environ, "GPUDASH_FAULT": "raise@step=30"}
    rec, group = start_recording(tmp_path, "input_pipeline", env=env)
    assert rec.wait() == 1
    assert live_group(group) == []


def test_the_group_is_gone_once_the_crash_is_reported(tmp_path: Path) -> None:
    """The dashboard keeps running after a crash, so the workers cannot wait for gpudash's exit:
    when ``poll()`` reports the SIGKILL, the group is already gone."""
    config = RunConfig(workload="input_pipeline", variant="baseline", device="cpu", image_size=16)
    runner = WorkloadRunner(config, log_path=tmp_path / "child.log")
    runner.start()
    try:
        until_event(runner, EventKind.STARTED)
        group = runner.pid
        assert group is not None and len(live_group(group)) > 1, "the DataLoader workers should be running"
        os.kill(group, signal.SIGKILL)
        crashed = until_event(runner, EventKind.CRASHED)
        assert live_group(group) == [], crashed.message
    finally:
        runner.stop()


def until_event(runner: WorkloadRunner, kind: EventKind) -> Event:
    """Poll until an event of ``kind`` comes, and return it."""
    seen: list[str] = []
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        for msg in runner.poll():
            if isinstance(msg, Event):
                if msg.kind == kind:
                    return msg
                seen.append(f"{msg.kind}: {msg.message}")
        time.sleep(0.05)
    pytest.fail(f"no {kind} event: {seen}")
