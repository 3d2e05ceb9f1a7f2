"""GPUDASH_FAULT under the dashboard: each injected fault against the real workload process on the
CPU, one Pilot session each. The dashboard stays up, says what happened, and leaves no process of
the workload's group behind."""

from __future__ import annotations

import re
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

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
from tests.messages import present
from tests.tui.conftest import wait_until

if TYPE_CHECKING:
    from textual.pilot import Pilot

    from gpudash.tui.app import GpuDashApp

Dashboard = tuple["GpuDashApp", "Pilot[int]", list[str], set[int]]


def workload_pid(app: GpuDashApp) -> int | None:
    """The pid of the workload process the dashboard's engine runs now."""
    source = app.source
    assert isinstance(source, EngineSession)
    return source.runner.pid


def last_sample(app: GpuDashApp) -> Sample:
    """The dashboard's latest throughput sample (the test has waited for one)."""
    return present(app.state.last_sample, "a sample")


@asynccontextmanager
async def dashboard(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    fault: str | None = None,
    *,
    sample_interval_s: float = 0.1,
    gpu_interval_s: float = FAST_CONFIG.gpu_interval_s,
    watchdog_s: float | None = FAST_CONFIG.watchdog_s,
) -> AsyncIterator[Dashboard]:
    """The app over a real engine, the workload with ``fault`` injected (``faults.ENV``) if given;
    yields (app, pilot, every notice said, the workload pids seen). Quits with q at the end and
    checks that nothing of any workload process is left."""
    from gpudash.tui.app import GpuDashApp, prepare_for_child_processes

    if fault is not None:
        monkeypatch.setenv(faults.ENV, fault)
    prepare_for_child_processes()
    for name, value in ONE_THREAD.items():
        monkeypatch.setenv(name, value)  # the workload process inherits it
    source = EngineSession(
        replace(FAST_CONFIG, sample_interval_s=sample_interval_s, gpu_interval_s=gpu_interval_s, watchdog_s=watchdog_s),
        log_path=str(tmp_path / "child.log"),
    )
    app = GpuDashApp(source, toasts=False)
    said: list[str] = []
    say = app.say

    def spy(text: str, severity: str = "info", toast: bool = False) -> None:
        said.append(text)
        say(text, severity, toast)

    monkeypatch.setattr(app, "say", spy)
    pids: set[int] = set()
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(pilot, lambda: source.runner.pid is not None, "the workload process", timeout_s=30)
        pids.add(present(source.runner.pid))
        yield app, pilot, said, pids
        await pilot.press("q")
        await wait_until(pilot, lambda: not app.is_running, "the app to exit", timeout_s=30)
    assert not source.alive
    for pid in pids:
        assert_nothing_left(pid)


async def record_from_the_first_sample(app: GpuDashApp, pilot: Pilot[int], path: Path) -> None:
    """Start the dashboard's recording (the c key's) once the workload runs."""
    await wait_until(pilot, lambda: app.state.last_sample is not None, "a first sample", timeout_s=60)
    app.start_recording(str(path))


@asynccontextmanager
async def recording_under(
    fault: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[GpuDashApp, Pilot[int], list[str], Path]]:
    """``dashboard`` with the fault ``fault`` set, recording to dash.csv from its first sample;
    yields (app, pilot, every notice said, the CSV's path)."""
    monkeypatch.setenv(faults.ENV, fault)
    path = tmp_path / "dash.csv"
    async with dashboard(tmp_path, monkeypatch) as (app, pilot, said, _):
        await record_from_the_first_sample(app, pilot, path)
        yield app, pilot, said, path


def said_line(said: list[str], part: str) -> str:
    hits = [s for s in said if part in s]
    assert hits, f"nothing said with {part!r}; said: {said}"
    return hits[-1]


@pytest.mark.slow
async def test_dashboard_reports_a_raising_step_and_restarts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with dashboard(tmp_path, monkeypatch, "raise@step=5") as (app, pilot, said, pids):
        await wait_until(pilot, lambda: app.state.ended, "the crash", timeout_s=60)
        line = said_line(said, "workload crashed")
        assert "InjectedFault: injected fault: raise at step 5" in line and "press r to restart" in line
        assert app.controller.status_text() == "crashed — r restarts"
        await pilot.press("r")  # a fresh workload process (it raises again at its step 5)
        await wait_until(
            pilot,
            lambda: workload_pid(app) not in pids and app.state.ended,
            "the restarted process to crash too",
            timeout_s=60,
        )
        pids.add(present(workload_pid(app)))


@pytest.mark.slow
async def test_dashboard_says_a_hung_workload_is_not_responding_and_r_replaces_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with dashboard(tmp_path, monkeypatch, "hang@step=10", watchdog_s=2.0) as (app, pilot, said, pids):
        await wait_until(pilot, lambda: app.controller.hung, "the watchdog", timeout_s=60)
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
            timeout_s=60,
        )
        pids.add(present(workload_pid(app)))
        assert_nothing_left(hung)  # terminated with its group, not left behind


@pytest.mark.slow
async def test_dashboard_records_up_to_a_process_that_exits_mid_reconfiguration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with recording_under("exit@reconfigure", tmp_path, monkeypatch) as (app, pilot, said, path):
        await wait_until(pilot, lambda: app.controller.recorded_messages >= 3, "a few recorded rows", timeout_s=30)
        await pilot.press("plus")
        await wait_until(pilot, lambda: app.state.ended, "the crash", timeout_s=60)
        line = said_line(said, "workload crashed")
        assert "exited with code 3" in line and "exiting during reconfiguration 1 (batch_size)" in line
        await pilot.press("c")  # stop recording
    rows = read_rows(path)
    assert samples(rows) and all(r["batch_size"] == "2" for r in samples(rows))
    assert rows[-1]["event_kind"] == "crashed" and "exited with code 3" in rows[-1]["event_message"]


@pytest.mark.slow
async def test_dashboard_shows_why_the_gpu_charts_stopped_when_nvml_loses_the_gpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", load_fake_pynvml(tmp_path))
    async with dashboard(tmp_path, monkeypatch, "nvml-gone@sample=3", gpu_interval_s=0.1) as (app, pilot, said, pids):
        await wait_until(
            pilot,
            lambda: app.state.gpu_info is not None and not app.state.gpu_info.available,
            "NVML to go",
            timeout_s=60,
        )
        line = said_line(said, "NVML lost the GPU")
        assert "the NVIDIA driver is no longer loaded" in line
        steps = app.state.last_sample.steps if app.state.last_sample else 0
        await wait_until(
            pilot,
            lambda: app.state.last_sample is not None and app.state.last_sample.steps > steps,
            "the workload to go on",
            timeout_s=60,
        )
        app.refresh_now()
        notice = str(app.query_one("#gpu-notice").render())
        assert "NVML lost the GPU" in notice and "driver is no longer loaded" in notice


@pytest.mark.slow
async def test_dashboard_warns_of_samples_dropped_while_it_read_slowly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    slow = "slow-parent@sample=5,for=1"
    async with dashboard(tmp_path, monkeypatch, slow, sample_interval_s=0.02) as (app, pilot, said, _):
        await wait_until(
            pilot, lambda: any(e.what == SAMPLES_DROPPED for e in app.state.events), "the drop report", timeout_s=60
        )
        line = said_line(said, "samples dropped")
        assert "totals stay right" in line and not line.startswith("✗")
        steps = last_sample(app).steps
        await wait_until(pilot, lambda: last_sample(app).steps > steps, "samples again", timeout_s=30)
        assert not app.state.ended


@pytest.mark.slow
async def test_dashboard_stops_a_recording_whose_write_fails_and_runs_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with recording_under("csv-write@row=5", tmp_path, monkeypatch) as (app, pilot, said, path):
        await wait_until(pilot, lambda: app.controller.recorder is None, "the failed write", timeout_s=30)
        line = said_line(said, "recording stopped")
        assert f"cannot write {path}: Input/output error" in line
        steps = last_sample(app).steps
        await wait_until(pilot, lambda: last_sample(app).steps > steps, "the run to go on", timeout_s=30)
        assert not app.state.ended
    assert len(read_rows(path)) == 4
