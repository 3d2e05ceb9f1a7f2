"""The workload child driven through ``EngineSession`` as the dashboard drives it: controls
mid-run, a killed child restarted, its own log removed or kept, the process group ended."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

import pytest
import torch

from gpudash.core import protocol
from gpudash.core.protocol import Event, EventKind, GpuInfo, GpuSample, Message, RunConfig, Sample
from gpudash.host.session import EngineSession

M = TypeVar("M", Sample, Event, GpuSample)


class Collector:
    """Polls a session and keeps everything; waits for conditions with a deadline."""

    def __init__(self, session: EngineSession) -> None:
        self.session = session
        self.msgs: list[Message] = []

    def wait(self, of: type[M], cond: Callable[[M], bool], what: str, timeout: float = 60.0) -> M:
        """The first new message of type ``of`` for which ``cond`` holds (polling until ``timeout``)."""
        deadline = time.monotonic() + timeout
        start = len(self.msgs)
        while True:
            for m in self.msgs[start:]:
                if isinstance(m, of) and cond(m):
                    return m
            start = len(self.msgs)
            if time.monotonic() > deadline:
                tail = "\n".join(map(str, self.msgs[-10:]))
                raise AssertionError(f"timed out waiting for {what}; last messages:\n{tail}")
            self.msgs.extend(self.session.poll())
            time.sleep(0.02)

    def event(self, kind: EventKind, what: str | None = None) -> Event:
        """The next event of ``kind`` (about ``what``, when given)."""
        return self.wait(Event, lambda e: e.kind == kind and (what is None or e.what == what), f"{kind} {what or ''}")

    def sample(self, cond: Callable[[Sample], bool], what: str) -> Sample:
        """The next throughput sample for which ``cond`` holds."""
        return self.wait(Sample, cond, what)

    def after(self, marker: Message) -> list[Message]:
        return self.msgs[self.msgs.index(marker) + 1 :]

    def events(self, kind: EventKind) -> list[Event]:
        """Every event of ``kind`` collected so far."""
        return [m for m in self.msgs if isinstance(m, Event) and m.kind == kind]


def _controls_mid_run(c: Collector, session: EngineSession) -> None:
    """A batch change, a refused variant (the run goes on), a pause and a resume."""
    started = c.event(EventKind.STARTED)
    assert started.details["torch"] == torch.__version__ and started.details["device"] == "cpu"
    c.sample(lambda m: m.steps >= 3, "a few steps")

    session.send(protocol.SetBatchSize(2))
    changed = c.event(EventKind.CHANGED, "batch_size")
    assert (changed.before, changed.after) == ("4", "2")
    c.sample(lambda m: m.batch_size == 2 and m.steps_per_s > 0, "rows at batch 2")
    assert all(m.batch_size == 2 for m in c.after(changed) if isinstance(m, Sample))

    session.send(protocol.SetVariant("pipelined"))  # needs CUDA streams: refused, the run goes on
    error = c.event(EventKind.ERROR, "variant")
    assert "CUDA" in error.message
    c.sample(lambda m: m.time_s > error.time_s and m.steps_per_s > 0, "rows after error")
    assert all(m.variant == "serial" for m in c.after(error) if isinstance(m, Sample))

    session.send(protocol.Pause())
    c.event(EventKind.PAUSED)
    session.send(protocol.Resume())
    c.event(EventKind.RESUMED)


def _killed_then_restarted(c: Collector, session: EngineSession) -> None:
    """SIGKILL: one "crashed" event that names it; a restart runs the last configuration seen."""
    pid = session.runner.pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    crashed = c.event(EventKind.CRASHED)
    assert "SIGKILL" in crashed.message and "older run" not in crashed.message
    assert len(c.events(EventKind.CRASHED)) == 1
    assert not session.alive

    session.restart()  # a fresh child, in the last configuration seen running
    c.event(EventKind.STARTED)
    again = c.sample(lambda m: m.steps >= 1, "samples again")
    assert again.batch_size == 2
    assert session.runner.pid != pid


@dataclass
class Driven:
    """One session driven through ``_controls_mid_run``, ``_killed_then_restarted``, a switch and a
    stop (their checks made on the way), with gpudash's own log: what was left to see at the end."""

    collector: Collector
    session: EngineSession
    log_path: str
    log_while_running: bool  # the own log existed before the stop


def _drive(session: EngineSession) -> Driven:
    """The session as the dashboard drives it, then killed, restarted, switched and stopped."""
    with open(session.log_path, "w") as f:  # the log appends: an older run's last line is no clue
        f.write("RuntimeError: from an older run\n")
    c = Collector(session)
    session.start()
    assert isinstance(session.gpu_info, GpuInfo)
    _controls_mid_run(c, session)
    _killed_then_restarted(c, session)

    session.send(protocol.SwitchWorkload("sync_loss", "fixed"))
    switched = c.wait(
        Event, lambda e: e.what == "workload" and e.kind in (EventKind.CHANGED, EventKind.ERROR), "the switch"
    )
    assert switched.kind == "changed", switched.message
    assert switched.after == "sync_loss"
    c.sample(lambda m: m.workload == "sync_loss" and m.variant == "fixed", "sync_loss rows")
    running = os.path.exists(session.log_path)
    session.stop()
    c.msgs.extend(session.poll())
    return Driven(c, session, session.log_path, running)


@pytest.fixture(scope="module")
def driven() -> Iterator[Driven]:
    """One workload child (gpudash's own log: no log path given) driven once for the tests below."""
    s = EngineSession(RunConfig(workload="encdec", device="cpu", sample_interval_s=0.1, gpu_interval_s=0.2))
    try:
        yield _drive(s)
    finally:
        s.stop()
        if os.path.exists(s.log_path):  # kept where a check above failed
            os.unlink(s.log_path)


@pytest.mark.slow
def test_session_controls_a_kill_a_restart_and_a_switch_mid_run(driven: Driven) -> None:
    """One child driven as the dashboard drives it, then killed, restarted, switched and stopped."""
    c, session = driven.collector, driven.session
    assert c.events(EventKind.STOPPED) and len(c.events(EventKind.CRASHED)) == 1  # the SIGKILL's only
    assert not session.alive and session.runner.exitcode == 0


@pytest.mark.slow
def test_own_log_removed_after_a_clean_stop(driven: Driven) -> None:
    """The log gpudash chose is there while the run goes on (a crash and a restart in it) and
    removed once it stopped cleanly."""
    assert driven.log_while_running
    assert not os.path.exists(driven.log_path)


@pytest.mark.slow
@pytest.mark.skipif(os.path.exists("/dev/nvidia0"), reason="this machine has a GPU")
def test_own_log_kept_after_a_crash_and_named() -> None:
    s = EngineSession(RunConfig(workload="encdec", device="cuda", sample_interval_s=0.1))
    c = Collector(s)
    try:
        s.start()
        crashed = c.event(EventKind.CRASHED)  # no CUDA here
    finally:
        s.stop()
    try:
        assert s.log_path in crashed.message
        assert os.path.exists(s.log_path)
    finally:
        os.unlink(s.log_path)


def test_terminate_reaches_the_childs_own_workers() -> None:
    """Escalation signals the child's process group: forked loader workers die with it."""
    import subprocess

    from gpudash.host.runner import WorkloadRunner

    proc = subprocess.Popen(
        ["sh", "-c", "sleep 60 & echo $!; wait"], start_new_session=True, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        worker = int(proc.stdout.readline())
        # a Popen stands in for the multiprocessing child: _signal_group reads only its pid
        WorkloadRunner._signal_group(proc, signal.SIGTERM)  # type: ignore[arg-type]
        proc.wait(timeout=10)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with open(f"/proc/{worker}/stat") as f:
                    if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                        break  # dead, not yet reaped by its new parent
            except (FileNotFoundError, ProcessLookupError):
                break
            time.sleep(0.02)
        else:
            raise AssertionError("the worker outlived its group's SIGTERM")
    finally:
        proc.kill()
        proc.wait()
