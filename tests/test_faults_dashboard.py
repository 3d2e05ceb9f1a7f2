"""GPUDASH_FAULT under the dashboard: each injected fault against the real workload process on the
CPU. The dashboard stays up, says what happened, and leaves no process of the workload's group
behind.

A fault is read where it fires, when that part is made: the parent's (NVML lost, a slow reader)
when the ``EngineSession`` is made, the workload's (raise, hang, exit) when each workload process
starts, a CSV's when its recording starts. So one dashboard takes several faults in turn, each
set just before its part is made: the tests below assert on two such dashboards (``crash_chain``,
``reader_chain``) driven once each, and a hung workload has a dashboard of its own.
"""

from __future__ import annotations

import asyncio
import re
import sys
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pytest

from gpudash.core import faults
from gpudash.core.protocol import SAMPLES_DROPPED, Sample
from gpudash.host.session import EngineSession
from tests.fault_runs import (
    FAST_CONFIG,
    ONE_THREAD,
    assert_nothing_left,
    group_members,
    load_fake_pynvml,
    read_rows,
    samples,
)
from tests.helpers import once_per_session
from tests.messages import present
from tests.tui.conftest import wait_until

if TYPE_CHECKING:
    from textual.pilot import Pilot

    from gpudash.tui.app import GpuDashApp

Dashboard = tuple["GpuDashApp", "Pilot[int]", list[str], set[int]]
WAIT_S = 180.0  # the most a wait takes on a loaded machine (a workload process imports torch first)
CHAIN_S = 900  # pytest-timeout for a test whose fixture drives a chain (its setup counts)
pytestmark = [pytest.mark.slow, pytest.mark.timeout(CHAIN_S)]  # each drives a dashboard and its workload
T = TypeVar("T")


def chain_fixture(name: str, drive: Callable[[Path, pytest.MonkeyPatch], Coroutine[Any, Any, T]]) -> Any:
    """A module fixture named ``name``: what one dashboard showed as ``drive`` took it through its faults,
    in a folder and an environment of its own (once per session: its tests may run in two xdist workers)."""

    def chain(tmp_path_factory: pytest.TempPathFactory) -> T:
        def driven() -> T:
            with pytest.MonkeyPatch.context() as monkeypatch:
                return asyncio.run(drive(tmp_path_factory.mktemp(name), monkeypatch))

        return once_per_session(tmp_path_factory, f"test_faults_dashboard-{name}", driven)

    return pytest.fixture(scope="module", name=name)(chain)


def workload_pid(app: GpuDashApp) -> int | None:
    """The pid of the workload process the dashboard's engine runs now."""
    source = app.source
    assert isinstance(source, EngineSession)
    return source.runner.pid


def last_sample(app: GpuDashApp) -> Sample:
    """The dashboard's latest throughput sample (the test has waited for one)."""
    return present(app.state.last_sample, "a sample")


def set_fault(monkeypatch: pytest.MonkeyPatch, fault: str | None) -> None:
    """``GPUDASH_FAULT=fault`` from now on (None: unset): read by the next part made."""
    if fault is None:
        monkeypatch.delenv(faults.ENV, raising=False)
    else:
        monkeypatch.setenv(faults.ENV, fault)


@asynccontextmanager
async def dashboard(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    fault: str | None = None,
    *,
    parent_fault: str | None = None,
    sample_interval_s: float = 0.1,
    gpu_interval_s: float = FAST_CONFIG.gpu_interval_s,
    watchdog_s: float | None = FAST_CONFIG.watchdog_s,
) -> AsyncIterator[Dashboard]:
    """The app over a real engine made under ``parent_fault``, its workload started under ``fault``
    (``faults.ENV``, each if given); yields (app, pilot, every notice said, the workload pids seen).
    Quits with q at the end and checks that nothing of any workload process is left."""
    from gpudash.tui.app import GpuDashApp
    from gpudash.tui.entry_points import prepare_for_child_processes

    prepare_for_child_processes()
    for name, value in ONE_THREAD.items():
        monkeypatch.setenv(name, value)  # the workload process inherits it
    set_fault(monkeypatch, parent_fault)
    source = EngineSession(
        replace(FAST_CONFIG, sample_interval_s=sample_interval_s, gpu_interval_s=gpu_interval_s, watchdog_s=watchdog_s),
        log_path=str(tmp_path / "child.log"),
    )
    set_fault(monkeypatch, fault)  # the workload process reads it when the app starts it
    app = GpuDashApp(source, toasts=False)
    said: list[str] = []
    say = app.say

    def spy(text: str, severity: str = "info", toast: bool = False) -> None:
        said.append(text)
        say(text, severity, toast)

    monkeypatch.setattr(app, "say", spy)
    pids: set[int] = set()
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(pilot, lambda: source.runner.pid is not None, "the workload process", timeout_s=WAIT_S)
        pids.add(present(source.runner.pid))
        yield app, pilot, said, pids
        await pilot.press("q")
        await wait_until(pilot, lambda: not app.is_running, "the app to exit", timeout_s=WAIT_S)
    assert not source.alive
    for pid in pids:
        assert_nothing_left(pid)


def said_line(said: list[str], part: str) -> str:
    """The latest notice that holds ``part`` ("" if none did)."""
    hits = [s for s in said if part in s]
    return hits[-1] if hits else ""


async def steps_go_on(app: GpuDashApp, pilot: Pilot[int], what: str) -> bool:
    """Whether the workload's samples go on past the latest one (waits for a later one)."""
    steps = app.state.last_sample.steps if app.state.last_sample else 0
    await wait_until(
        pilot, lambda: app.state.last_sample is not None and app.state.last_sample.steps > steps, what, timeout_s=WAIT_S
    )
    return not app.state.ended


# -- one dashboard: NVML lost, then a workload that exits mid-change, then one that raises ---------
@dataclass
class CrashChain:
    """What the dashboard said and showed as ``drive_crash_chain`` took it through its faults."""

    nvml_line: str = ""
    nvml_went_on: bool = False
    gpu_notice: str = ""
    exit_line: str = ""
    rows: list[dict[str, str]] = field(default_factory=list)
    raise_line: str = ""
    raise_status: str = ""
    pids: list[int] = field(default_factory=list)  # the workload processes, in turn


async def nvml_goes(app: GpuDashApp, pilot: Pilot[int], said: list[str], seen: CrashChain) -> None:
    """nvml-gone@sample=3 (the parent's NVML sampler): the notice, and the workload goes on."""
    await wait_until(
        pilot,
        lambda: app.state.gpu_info is not None and not app.state.gpu_info.available,
        "NVML to go",
        timeout_s=WAIT_S,
    )
    seen.nvml_line = said_line(said, "NVML lost the GPU")
    seen.nvml_went_on = await steps_go_on(app, pilot, "the workload to go on")
    app.refresh_now()
    seen.gpu_notice = str(app.query_one("#gpu-notice").render())


async def exits_mid_change(app: GpuDashApp, pilot: Pilot[int], said: list[str], path: Path, seen: CrashChain) -> None:
    """exit@reconfigure (this workload process): recorded from a sample on, + makes it exit."""
    await wait_until(pilot, lambda: app.state.last_sample is not None, "a first sample", timeout_s=WAIT_S)
    app.start_recording(str(path))  # the c key's
    await wait_until(pilot, lambda: app.controller.recording.written >= 3, "a few recorded rows", timeout_s=WAIT_S)
    await pilot.press("plus")
    await wait_until(pilot, lambda: app.state.ended, "the crash", timeout_s=WAIT_S)
    seen.exit_line = said_line(said, "workload crashed")
    await pilot.press("c")  # stop recording


async def restarted_and_crashed(app: GpuDashApp, pilot: Pilot[int], pids: set[int], seen: CrashChain) -> None:
    """r: a fresh workload process, which crashes too (told apart from the ones before by its pid)."""
    await pilot.press("r")
    await wait_until(
        pilot, lambda: workload_pid(app) not in pids and app.state.ended, "the restarted one to crash", timeout_s=WAIT_S
    )
    pid = present(workload_pid(app))
    pids.add(pid)
    seen.pids.append(pid)


async def drive_crash_chain(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CrashChain:
    """NVML lost (the session's), a workload process that exits mid-reconfiguration (the first),
    then raise@step=5 for the one r starts after it."""
    seen = CrashChain()
    monkeypatch.setitem(sys.modules, "pynvml", load_fake_pynvml(tmp_path))
    chain = dashboard(tmp_path, monkeypatch, "exit@reconfigure", parent_fault="nvml-gone@sample=3", gpu_interval_s=0.1)
    async with chain as (app, pilot, said, pids):
        seen.pids.append(present(workload_pid(app)))
        await nvml_goes(app, pilot, said, seen)
        await exits_mid_change(app, pilot, said, tmp_path / "dash.csv", seen)
        set_fault(monkeypatch, "raise@step=5")  # read by the workload process r starts next
        await restarted_and_crashed(app, pilot, pids, seen)
        seen.raise_line = said_line(said, "workload crashed")
        seen.raise_status = app.controller.status_text()
    seen.rows = read_rows(tmp_path / "dash.csv")
    return seen


crash_chain_fixture = chain_fixture("crash_chain", drive_crash_chain)  # NVML lost, an exit mid-change, a raise


def test_dashboard_reports_a_raising_step_and_restarts(crash_chain: CrashChain) -> None:
    line = crash_chain.raise_line
    assert "InjectedFault: injected fault: raise at step 5" in line and "press r to restart" in line
    assert crash_chain.raise_status == "crashed — r restarts"
    # it raised in the fresh workload process r started after the crash before it
    assert len(set(crash_chain.pids)) == 2


def test_dashboard_records_up_to_a_process_that_exits_mid_reconfiguration(crash_chain: CrashChain) -> None:
    line = crash_chain.exit_line
    assert "exited with code 3" in line and "exiting during reconfiguration 1 (batch_size)" in line
    rows = crash_chain.rows
    assert samples(rows) and all(r["batch_size"] == "2" for r in samples(rows))
    assert rows[-1]["event_kind"] == "crashed" and "exited with code 3" in rows[-1]["event_message"]


def test_dashboard_shows_why_the_gpu_charts_stopped_when_nvml_loses_the_gpu(crash_chain: CrashChain) -> None:
    assert "the NVIDIA driver is no longer loaded" in crash_chain.nvml_line
    assert crash_chain.nvml_went_on  # the workload goes on
    notice = crash_chain.gpu_notice
    assert "NVML lost the GPU" in notice and "driver is no longer loaded" in notice


# -- one dashboard: a parent that reads slowly, then a recording whose write fails ------------------
@dataclass
class ReaderChain:
    """What the dashboard said as ``drive_reader_chain`` took it through its faults."""

    drop_line: str = ""
    went_on_after_drops: bool = False
    stop_line: str = ""
    went_on_after_write: bool = False
    path: Path = Path()
    rows: int = 0


async def drive_reader_chain(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ReaderChain:
    """slow-parent@sample=5 (the session's reader), then csv-write@row=5 for a recording begun after."""
    seen = ReaderChain(path=tmp_path / "dash.csv")
    slow = "slow-parent@sample=5,for=1"
    async with dashboard(tmp_path, monkeypatch, parent_fault=slow, sample_interval_s=0.02) as (app, pilot, said, _):
        dropped = lambda: any(e.what == SAMPLES_DROPPED for e in app.state.events)  # noqa: E731
        await wait_until(pilot, dropped, "the drop report", timeout_s=WAIT_S)
        seen.drop_line = said_line(said, "samples dropped")
        seen.went_on_after_drops = await steps_go_on(app, pilot, "samples again")
        set_fault(monkeypatch, "csv-write@row=5")  # read by the recorder the next line makes
        app.start_recording(str(seen.path))  # the c key's
        await wait_until(pilot, lambda: app.controller.recording.recorder is None, "the failed write", timeout_s=WAIT_S)
        seen.stop_line = said_line(said, "recording stopped")
        seen.went_on_after_write = await steps_go_on(app, pilot, "the run to go on")
    seen.rows = len(read_rows(seen.path))
    return seen


reader_chain_fixture = chain_fixture("reader_chain", drive_reader_chain)  # a slow reader, a failing write


def test_dashboard_warns_of_samples_dropped_while_it_read_slowly(reader_chain: ReaderChain) -> None:
    line = reader_chain.drop_line
    assert "totals stay right" in line and not line.startswith("✗")
    assert reader_chain.went_on_after_drops  # samples again, the run not ended


def test_dashboard_stops_a_recording_whose_write_fails_and_runs_on(reader_chain: ReaderChain) -> None:
    assert f"cannot write {reader_chain.path}: Input/output error" in reader_chain.stop_line
    assert reader_chain.went_on_after_write
    assert reader_chain.rows == 4


# -- a dashboard of its own: a hung workload --------------------------------------------------------
async def test_dashboard_says_a_hung_workload_is_not_responding_and_r_replaces_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with dashboard(tmp_path, monkeypatch, "hang@step=10", watchdog_s=2.0) as (app, pilot, said, pids):
        await wait_until(pilot, lambda: app.controller.hung, "the watchdog", timeout_s=WAIT_S)
        line = said_line(said, "not responding")
        assert re.match(r"✗ workload process not responding for \d+ s \(pid \d+\)", line)
        assert line.endswith("r restarts it, q quits")
        assert app.controller.status_text() == "not responding — r restarts"
        hung = present(workload_pid(app))
        assert group_members(hung), "the dashboard leaves a hung process running until asked"
        monkeypatch.delenv(faults.ENV)  # the next workload process runs as usual
        await pilot.press("r")
        await wait_until(
            pilot,
            lambda: workload_pid(app) != hung and app.state.last_sample is not None and app.state.status == "running",
            "a fresh workload process",
            timeout_s=WAIT_S,
        )
        pids.add(present(workload_pid(app)))
        assert_nothing_left(hung)  # terminated with its group, not left behind
