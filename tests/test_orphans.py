"""No orphans: the workload process's group (its DataLoader workers, its resource tracker) is
gone when gpudash exits, whatever ended the run (issue 11, failure 4), and every process gpudash
started is gone within 5 s of gpudash being SIGKILLed, whatever a step is doing, with no temp
directory of the run left behind (issue 23; its parent watch alone: tests/test_parent_watch.py).

Each test runs ``gpudash --record`` on the CPU in a subprocess and looks at the group with
``ps``, not with gpudash's own code. The group must be empty when gpudash has exited: gpudash
waits for it (the issue allows 1 s; waiting makes the check exact). After a SIGKILL nothing can
wait: the processes must be gone within ``DIE_WITH_PARENT_S``.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from csv import DictReader
from pathlib import Path

import pytest

from gpudash.core.protocol import Event, EventKind, RunConfig
from gpudash.host.runner import WorkloadRunner, stop_timeout
from tests.helpers import needs_two_cpus

# small and quick on the CPU; input_pipeline's baseline starts 4 DataLoader workers, augment's cpu 2
FAMILIES = {
    "encdec": ["--image-size", "16"],
    "augment": ["--image-size", "16", "-v", "cpu"],
    "sync_loss": ["--image-size", "16"],
    "input_pipeline": ["--image-size", "16", "-v", "baseline"],
}
START_TIMEOUT_S = 180  # a generous bound on torch's import on a busy 2-core machine
EXIT_TIMEOUT_S = 120  # from the end asked for (or 30 steps) to gpudash's exit, on a loaded machine
DIE_WITH_PARENT_S = 5.0  # issue 23: everything gpudash started is gone this soon after gpudash is SIGKILLed


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
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gpudash", *argv],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
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

    def wait(self, timeout: float = EXIT_TIMEOUT_S) -> int:
        code = self.proc.wait(timeout=timeout)
        while (line := self.lines.get(timeout=EXIT_TIMEOUT_S)) is not None:
            self.seen.append(line)
        return code


def start_recording(
    tmp_path: Path, family: str, extra: Sequence[str] = (), csv: str | None = None, env: dict[str, str] | None = None
) -> tuple[Recording, int]:
    """A recording of ``family`` that has started; (it, the workload's group id)."""
    out = csv or str(tmp_path / "run.csv")
    rec = Recording(["--record", out, "-w", family, "--device", "cpu", *FAMILIES[family], *extra], env)
    rec.wait_for("] started")
    group = workload_pid(rec.proc.pid)
    if family in ("input_pipeline", "augment"):
        assert len(live_group(group)) > 1, "the DataLoader workers should be running"
    return rec, group


@pytest.mark.slow
@pytest.mark.parametrize("family", ["encdec", "augment", "input_pipeline"])  # sync_loss's group: encdec's, one process
def test_killing_the_workload_process_leaves_no_process_of_its_group(tmp_path: Path, family: str) -> None:
    rec, group = start_recording(tmp_path, family)
    os.kill(group, signal.SIGKILL)
    assert rec.wait() == 1  # the workload failed
    said = "".join(rec.seen)
    assert "workload process killed by SIGKILL" in said
    assert "out of memory" not in said  # a small workload's RSS: not taken for the OOM killer's (test_limits.py)
    assert live_group(group) == []


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_signal_to_gpudash_ends_the_group_and_removes_the_empty_temporary_log(
    tmp_path: Path, short_tmp: Path, sig: int
) -> None:
    """``--record -`` logs the workload to gpudash-PID-child.log in the temp dir: gone afterwards."""
    env = {**os.environ, "TMPDIR": str(short_tmp)}
    rec, group = start_recording(tmp_path, "input_pipeline", csv="-", env=env)
    rec.proc.send_signal(sig)
    assert rec.wait() == 130
    assert live_group(group) == []
    assert list(short_tmp.glob("gpudash-*-child.log")) == []


@pytest.mark.slow
def test_a_finished_run_leaves_no_process_of_its_group(tmp_path: Path) -> None:
    rec, group = start_recording(tmp_path, "input_pipeline", ["--steps", "3"])
    assert rec.wait() == 0
    assert live_group(group) == []


@pytest.mark.slow
def test_a_crashed_workload_leaves_no_process_of_its_group(tmp_path: Path) -> None:
    env = {**os.environ, "GPUDASH_FAULT": "raise@step=10"}  # its workers running, and seen, by then
    rec, group = start_recording(tmp_path, "input_pipeline", env=env)
    assert rec.wait() == 1
    assert live_group(group) == []


@pytest.mark.slow
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


# -- issue 23: everything gpudash started dies with it, even SIGKILLed ------------------------------------
def descendants(root: int) -> dict[int, str]:
    """The live descendants of ``root``, by ``ps``: pid → start time (``lstart``), which tells a
    process from a later one given the same pid."""
    out = subprocess.run(["ps", "-e", "-o", "pid=,ppid=,stat=,lstart="], capture_output=True, text=True, check=True)
    rows: dict[int, tuple[int, str, str]] = {}
    for line in out.stdout.splitlines():
        pid_text, ppid_text, stat, lstart = line.split(None, 3)
        rows[int(pid_text)] = (int(ppid_text), stat, lstart.strip())
    found: dict[int, str] = {}
    frontier = [root]
    while frontier:
        parent = frontier.pop()
        for pid, (ppid, state, started) in rows.items():
            if ppid == parent and pid not in found:
                frontier.append(pid)
                if not state.startswith("Z"):
                    found[pid] = started
    return found


def still_alive(procs: dict[int, str]) -> list[str]:
    """Those of ``procs`` still running (not zombies), as ``ps`` lines."""
    out = subprocess.run(["ps", "-e", "-o", "pid=,stat=,lstart=,args="], capture_output=True, text=True, check=True)
    left = []
    for line in out.stdout.splitlines():
        pid, state, rest = line.split(None, 2)
        if int(pid) in procs and not state.startswith("Z") and rest.startswith(procs[int(pid)]):
            left.append(line.strip()[:200])
    return left


def gone_within(procs: dict[int, str], timeout: float) -> list[str]:
    """Wait up to ``timeout`` s for every one of ``procs`` to be gone; the ``ps`` lines of those left."""
    deadline = time.monotonic() + timeout
    while (left := still_alive(procs)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def kill_all(procs: dict[int, str]) -> None:
    """Clean-up: SIGKILL whatever of ``procs`` is left."""
    for line in still_alive(procs):
        try:
            os.kill(int(line.split()[0]), signal.SIGKILL)
        except ProcessLookupError:
            pass


def temp_leftovers(tmp: Path) -> list[str]:
    """The run's temp directories left in ``tmp``: the launcher's (``torchelastic_*``) and gpudash's."""
    return sorted(p.name for p in tmp.iterdir() if p.name.startswith(("torchelastic_", "gpudash-")))


def wait_for_line(path: Path, text: str) -> None:
    """Wait until the file at ``path`` holds ``text``."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while not (path.exists() and text in path.read_text(errors="replace")):
        if time.monotonic() > deadline:
            pytest.fail(f"no {text!r} in {path}")
        time.sleep(0.1)


DDP = ["-w", "sync_loss", "--image-size", "16", "--nproc", "2"]  # the launcher and 2 ranks (gloo)
KILLED = {  # (options, fault): a step that hangs forever is seen only by a watcher, not between steps
    "input_pipeline-hung": (
        ["-w", "input_pipeline", "-v", "baseline", "--image-size", "16", "-b", "8"],  # small: 3 steps fast under load
        "hang@step=3",
    ),  # 4 workers
    "nproc-2-hung": (DDP, "hang@step=3"),
    "nproc-2-running": (DDP, None),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", [pytest.param(c, marks=needs_two_cpus) if KILLED[c][0] is DDP else c for c in KILLED])
def test_sigkill_to_gpudash_ends_all_it_started(short_tmp: Path, tmp_path: Path, case: str) -> None:
    """Causes 3 and 4: within 5 s of gpudash's SIGKILL, no process it started (the workload or
    launcher, the loader workers or ranks, the resource tracker) runs, and no temp dir is left."""
    options, fault = KILLED[case]
    tmp = short_tmp
    env = {**os.environ, "TMPDIR": str(tmp), **({"GPUDASH_FAULT": fault} if fault else {})}
    rec = Recording(["--record", str(tmp_path / "run.csv"), "--device", "cpu", *options], env)
    started: dict[int, str] = {}
    group = None
    try:
        rec.wait_for("] started")
        group = workload_pid(rec.proc.pid)
        if fault:
            wait_for_line(tmp_path / "run.log", "hanging at step 3")
        started = descendants(rec.proc.pid)
        assert len(live_group(group)) >= 3, "the loader workers or the ranks should be running"
        os.kill(rec.proc.pid, signal.SIGKILL)
        assert gone_within(started, DIE_WITH_PARENT_S) == []
        assert live_group(group) == []
        assert temp_leftovers(tmp) == []
    finally:
        rec.proc.kill()
        kill_all(started)
        if group is not None and live_group(group):
            os.killpg(group, signal.SIGKILL)


@pytest.mark.slow
@needs_two_cpus
def test_a_data_parallel_run_leaves_no_temp_dir(short_tmp: Path, tmp_path: Path) -> None:
    """Cause 5: torch's launcher no longer leaves a ``torchelastic_*`` directory in the temp dir."""
    tmp = short_tmp
    env = {**os.environ, "TMPDIR": str(tmp)}
    rec = Recording(["--record", str(tmp_path / "run.csv"), "--device", "cpu", *DDP, "--steps", "5"], env)
    assert rec.wait(START_TIMEOUT_S) == 0, "".join(rec.seen)
    assert temp_leftovers(tmp) == []


@pytest.mark.slow
@needs_two_cpus
def test_a_data_parallel_run_terminated_while_stopping_is_stopped_not_crashed(short_tmp: Path, tmp_path: Path) -> None:
    """Cause 15a: a run that reached its duration but did not stop itself in time (its ranks hang
    in a step) is terminated by gpudash: a stop (exit 0, status done), not a crash. The ranks hang
    in their first step: whatever the load, the duration ends with them hung."""
    tmp = short_tmp
    env = {**os.environ, "TMPDIR": str(tmp), "GPUDASH_FAULT": "hang@step=1"}
    rec = Recording(["--record", str(tmp_path / "run.csv"), "--device", "cpu", *DDP, "--duration", "1"], env)
    try:
        code = rec.wait(START_TIMEOUT_S)
    finally:
        rec.proc.kill()
    text = "".join(rec.seen)
    assert code == 0, text
    assert "failed" not in text, text
    with open(tmp_path / "run.csv", newline="") as f:
        events = [(row["event_kind"], row["event_message"]) for row in DictReader(f) if row["row_kind"] == "event"]
    assert events[-1][0] == "stopped" and events[-1][1].startswith("workload terminated after "), events
    assert "crashed" not in [kind for kind, _ in events], events
    assert json.loads((tmp_path / "run.json").read_text())["status"] == "done"
    assert temp_leftovers(tmp) == []


def test_a_data_parallel_run_gets_longer_to_stop_with_more_ranks() -> None:
    assert stop_timeout(10.0, 1) == 10.0
    assert stop_timeout(10.0, 1) < stop_timeout(10.0, 2) < stop_timeout(10.0, 8)
    assert stop_timeout(0, 8) == 0  # "terminate at once" stays that


@pytest.mark.slow
def test_a_stopped_runner_leaves_no_queue_semaphore_to_interpreter_exit(tmp_path: Path) -> None:
    """Each queue semaphore is unlinked and unregistered by stop(), in the calling thread: one
    left to a feeder thread at interpreter exit could be unlinked but never unregistered, and
    multiprocessing's resource tracker then prints "leaked semaphore" warnings after gpudash's
    last line (the one-line error a user reads)."""
    from multiprocessing import synchronize, util

    def pending_semaphores() -> int:
        registry = list(util._finalizer_registry.values())  # type: ignore[attr-defined]  # the exit-time cleanups
        cleanup = synchronize.SemLock._cleanup  # type: ignore[attr-defined]  # unlinks and unregisters one
        return sum(getattr(f, "_callback", None) is cleanup for f in registry)

    before = pending_semaphores()
    config = RunConfig(workload="sync_loss", variant="fixed", device="cpu", image_size=16)
    runner = WorkloadRunner(config, log_path=tmp_path / "child.log")
    runner.start()
    try:
        until_event(runner, EventKind.STARTED)
        assert pending_semaphores() > before, "the runner's queues hold semaphores while it runs"
    finally:
        runner.stop()
    assert pending_semaphores() == before
