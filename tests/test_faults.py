"""GPUDASH_FAULT: every injected fault against the real workload process on the CPU.

For each fault: ``gpudash --record`` keeps every row written before it and exits with the
documented status, the dashboard stays up and says what happened, and no process of the
workload's group is left. The ``--record`` runs start together (one module fixture) so the
file stays quick on two cores. The dashboard's cases are in ``tests/test_faults_dashboard.py``.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import NamedTuple

import pytest

from gpudash.core import faults
from gpudash.core.faults import Fault, FaultSpecError
from gpudash.core.protocol import NOT_RESPONDING, NVML_LOST, SAMPLES_DROPPED, Event, EventKind, Message, Sample
from tests.fault_runs import (
    FAST,
    ONE_THREAD,
    events,
    fake_pynvml_dir,
    group_members,
    load_fake_pynvml,
    read_rows,
    samples,
)
from tests.helpers import once_per_session
from tests.messages import present, samples_of


# -- the grammar -----------------------------------------------------------------------------------
def test_every_documented_form_parses_and_round_trips() -> None:
    assert faults.parse(None) is None and faults.parse("  ") is None
    assert faults.parse("raise@step=5") == Fault("raise", 5)
    assert faults.parse("hang@step=12") == Fault("hang", 12)
    assert faults.parse("exit@reconfigure") == Fault("exit", 1)
    assert faults.parse("exit@reconfigure=3") == Fault("exit", 3)
    assert faults.parse("nvml-lost@sample=4") == Fault("nvml-lost", 4)
    assert faults.parse("nvml-gone@sample=1") == Fault("nvml-gone", 1)
    assert faults.parse("slow-parent@sample=10") == Fault("slow-parent", 10, 1.0)
    assert faults.parse("slow-parent@sample=10,for=2.5") == Fault("slow-parent", 10, 2.5)
    assert faults.parse("csv-write@row=7") == Fault("csv-write", 7)
    for text in ("raise@step=5", "exit@reconfigure=2", "slow-parent@sample=3,for=1.5", "csv-write@row=7"):
        assert faults.parse(str(faults.parse(text))) == faults.parse(text)


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("explode@step=3", "unknown fault 'explode'"),
        ("raise", "raise takes @step"),
        ("raise@row=3", "raise takes @step"),
        ("raise@step", "raise needs a count"),
        ("hang@step=0", "step must be a whole number ≥ 1, not '0'"),
        ("hang@step=two", "not 'two'"),
        ("csv-write@row=3,for=2", "unexpected 'for=2'"),
        ("slow-parent@sample=3,for=-1", "for must be a number of seconds > 0"),
        ("slow-parent@sample=3,every=2", "unexpected 'every=2'"),
    ],
)
def test_a_bad_fault_is_refused_in_one_line_naming_the_forms(text: str, why: str) -> None:
    with pytest.raises(FaultSpecError) as caught:
        faults.parse(text)
    message = str(caught.value)
    assert why in message and "\n" not in message
    assert "raise@step=N" in message and "csv-write@row=N" in message


def test_gpudash_refuses_a_bad_fault_before_starting_anything(tmp_path: Path) -> None:
    env = {**os.environ, faults.ENV: "hang@stp=3"}
    done = subprocess.run(
        [sys.executable, "-m", "gpudash", "--record", "x.csv", *FAST],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"gpudash: error: {faults.ENV}='hang@stp=3': hang takes @step: hang@step=N (forms: raise@step=N, "
        "hang@step=N, exit@reconfigure[=1], nvml-lost@sample=N, nvml-gone@sample=N, slow-parent@sample=N,for=S, "
        "csv-write@row=N)"
    ]
    assert not (tmp_path / "x.csv").exists()


# -- the pieces, in-process ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kind", "why"),
    [
        ("nvml-lost", "the GPU has fallen off the bus (GPU is lost)"),
        ("nvml-gone", "the NVIDIA driver is no longer loaded"),
    ],
)
def test_nvml_failing_mid_run_is_one_event_then_no_telemetry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str, why: str
) -> None:
    from gpudash.host.nvml import NvmlSampler

    monkeypatch.setitem(sys.modules, "pynvml", load_fake_pynvml(tmp_path))
    monkeypatch.setenv(faults.ENV, f"{kind}@sample=3")
    sampler = NvmlSampler(0, 0.5)
    assert sampler.open().available
    got = [sampler.sample() for _ in range(5)]
    assert [g is not None for g in got] == [True, True, False, False, False]
    assert present(got[1]).power_w == 250.0  # the samples before the fault are whole
    drained = sampler.drain()
    assert drained[:2] == got[:2] and len(drained) == 3
    lost = drained[2]
    assert isinstance(lost, Event) and lost.kind == EventKind.ERROR and lost.what == NVML_LOST
    assert why in lost.message and "no GPU telemetry from here on" in lost.message
    assert not sampler.info.available and sampler.info.unavailable == lost.message
    assert sampler.info.names == ("Fake GPU",)  # what it was stays known
    sampler.stop()


def test_a_full_queue_drops_samples_counts_them_and_keeps_every_event_in_order() -> None:
    from gpudash.engine.channel import ParentChannel

    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue(maxsize=3)
    channel = ParentChannel(ctx.Queue(), out, t0=time.monotonic())

    def sample(steps: int) -> Sample:
        return Sample(0.0, "encdec", "serial", 8, steps, steps * 8, 0.25, 4.0, 32.0, 250.0, 260.0, None)

    def read(n: int) -> list[Message]:
        return [out.get(timeout=10) for _ in range(n)]

    for steps in (1, 2, 3):
        channel.emit(sample(steps))
    changed = Event(1.0, EventKind.CHANGED, what="batch_size", before="8", after="16")
    channel.emit(changed)  # the queue is full: held, not lost, and training does not wait
    for steps in (4, 5, 6, 7):
        channel.emit(sample(steps))  # dropped while anything is held or the queue is full
    assert (channel.dropped_samples, len(channel._backlog)) == (4, 1)
    assert [m.steps for m in samples_of(read(3))] == [1, 2, 3]
    channel.emit(sample(8))  # room again: the held event, the report and the latest dropped sample first
    first, report, latest = read(3)
    assert first == changed
    assert isinstance(report, Event) and isinstance(latest, Sample)
    assert report.kind == EventKind.ERROR and report.what == SAMPLES_DROPPED
    # 4, 5 and 6 are lost; 7, the latest, follows the report with the totals
    assert report.details["dropped_samples"] == "3" and report.message.startswith("3 samples dropped over")
    assert "totals stay right" in report.message
    assert latest.steps == 7  # cumulative: nothing trained was lost from the totals
    channel.emit(sample(9))  # 8 found the queue full again: it goes on late, with no report (none lost)
    assert [m.steps for m in samples_of(read(2))] == [8, 9]
    assert channel.dropped_samples == 0
    channel.close()


def test_a_run_that_ends_while_the_parent_is_slow_still_sends_its_totals() -> None:
    """The queue is full when training ends: the drop report and the last sample still arrive
    (the final steps in the CSV are the run's)."""
    from gpudash.engine.channel import ParentChannel

    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue(maxsize=2)
    channel = ParentChannel(ctx.Queue(), out, t0=time.monotonic())
    for steps in range(1, 7):
        channel.emit(Sample(0.0, "encdec", "serial", 8, steps, steps * 8, 0.25, 4.0, 32.0, 250.0, 260.0, None))
    dropped = channel.dropped_samples
    assert dropped >= 2  # the queue holds 2 or 3 (its semaphore): the rest were dropped, 6 the latest
    # what close() does first, at the end of the run, while the parent reads again
    flushing = threading.Thread(target=channel.flush, args=(10.0,))
    flushing.start()
    got: list[Message] = []
    while not (got and isinstance(got[-1], Sample) and got[-1].steps == 6):
        got.append(out.get(timeout=10))
    flushing.join()
    reports = [m for m in got if isinstance(m, Event) and m.what == SAMPLES_DROPPED]
    assert len(reports) == 1 and reports[0].details["dropped_samples"] == str(dropped - 1)
    assert got.index(reports[0]) == len(got) - 2  # the report, then the totals
    channel.close()


def test_the_watchdog_waits_for_a_slow_step_and_speaks_once_per_silence() -> None:
    from gpudash.core.protocol import TraceWindow
    from gpudash.host.watchdog import Watchdog

    now = [0.0]
    dog = Watchdog(2.0, clock=lambda: now[0])

    def sample(steps: int, p95_ms: float) -> Sample:
        return Sample(now[0], "encdec", "serial", 8, steps, steps * 8, 0.25, 4.0, 32.0, p95_ms, p95_ms, None)

    now[0] = 100.0
    assert dog.check() is None  # not started: torch is still loading
    dog.heard(Event(now[0], EventKind.STARTED))
    now[0] = 109.0
    assert dog.check() is None  # the first step may warm up: 5 limits
    now[0] = 110.5
    assert dog.check() == pytest.approx(10.5)
    assert dog.check() is None and dog.unresponsive  # said once
    dog.heard(sample(3, 1500.0))  # heard again; steps of 1.5 s: 5 of them before it speaks
    assert not dog.unresponsive
    now[0] = 117.0
    assert dog.check() is None
    now[0] = 118.0
    assert dog.check() == pytest.approx(7.5)
    dog.heard(sample(4, 10.0))
    dog.sent(TraceWindow(200))  # a profiler window answers when it ends
    now[0] = 200.0
    assert dog.check() is None
    dog.heard(Event(now[0], EventKind.MEASURED, what="trace"))
    now[0] = 202.5
    assert dog.check() == pytest.approx(2.5)
    dog.heard(Event(now[0], EventKind.CRASHED))
    now[0] = 300.0
    assert dog.check() is None  # it is gone: the crash says so


# -- gpudash --record: every fault in its own run, all started at once ----------------------------
SLOW_PARENT_STEPS = 1000
RECORD_CASES: dict[str, tuple[str, list[str]]] = {
    "raise": ("raise@step=5", ["--sample-interval", "0.05"]),
    "hang": ("hang@step=5", ["--sample-interval", "0.05", "--watchdog", "2"]),
    # NVML's 4th sample (0.4 s) comes while torch loads: every step is after the loss, the run a count
    "nvml": ("nvml-lost@sample=4", ["--sample-interval", "0.1", "--interval", "0.1", "--steps", "20"]),
    # enough steps that the run outlasts the pause on a quiet machine (~230 steps/s: 100 queued
    # samples take 1 s, then 1 s more), whatever the load
    "slow": ("slow-parent@sample=5,for=1", ["--sample-interval", "0.01", "--steps", str(SLOW_PARENT_STEPS)]),
    "csv": ("csv-write@row=8", ["--sample-interval", "0.05", "--duration", "30"]),
}


class Recording:
    """One ``gpudash --record NAME.csv`` under a fault, as a user would start it."""

    def __init__(self, folder: Path, name: str, fault: str, args: list[str]) -> None:
        self.csv = folder / f"{name}.csv"
        env = {**os.environ, faults.ENV: fault, **ONE_THREAD}
        if name == "nvml":  # a fake NVML in front of the real one (this machine has no driver)
            env["PYTHONPATH"] = os.pathsep.join([str(fake_pynvml_dir(folder)), env.get("PYTHONPATH", "")])
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gpudash", "--record", self.csv.name, *FAST, *args],
            cwd=folder,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def finish(self) -> Finished:
        """What became of it, once it has exited."""
        try:
            _, err = self.proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise
        pid = int(json.loads(self.csv.with_suffix(".json").read_text())["started"]["pid"])
        deadline = time.monotonic() + 5  # its group's last members may still be exiting
        while (left := group_members(pid)) and time.monotonic() < deadline:
            time.sleep(0.05)
        return Finished(self.proc.returncode, err, read_rows(self.csv), self.csv, left)


class Finished(NamedTuple):
    """A fault's ``--record`` run once it has exited."""

    code: int  # its exit status
    err: str  # its stderr
    rows: list[dict[str, str]]  # the CSV's
    csv: Path
    left: list[int]  # processes of the workload's group still running after it

    def checked(self) -> tuple[int, str, list[dict[str, str]]]:
        """(exit status, stderr, rows), once nothing of the workload's group is left."""
        assert self.left == [], f"processes of the workload's group are left: {self.left}"
        return self.code, self.err, self.rows


def record_all(folder: Path) -> dict[str, Finished]:
    """Every case of ``RECORD_CASES``, started together, once each has exited."""
    runs = {name: Recording(folder, name, fault, args) for name, (fault, args) in RECORD_CASES.items()}
    try:
        return {name: run.finish() for name, run in runs.items()}
    finally:
        for run in runs.values():
            if run.proc.poll() is None:
                run.proc.kill()
                run.proc.wait()


@pytest.fixture(scope="module")
def recordings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Finished]:
    return once_per_session(
        tmp_path_factory, "test_faults-recordings", lambda: record_all(tmp_path_factory.mktemp("record-faults"))
    )


@pytest.mark.slow
def test_record_a_raising_step_keeps_the_rows_and_exits_1(recordings: dict[str, Finished]) -> None:
    code, err, rows = recordings["raise"].checked()
    assert code == 1
    assert (
        err.strip()
        .splitlines()[-1]
        .startswith("gpudash: error: workload failed: InjectedFault: injected fault: raise at step 5")
    )
    assert samples(rows) and 0 < int(samples(rows)[-1]["steps"]) <= 4  # the samples before the fault
    crashed = events(rows, "crashed")
    assert len(crashed) == 1 and rows[-1] == crashed[0]
    assert "InjectedFault: injected fault: raise at step 5" in crashed[0]["event_message"]


@pytest.mark.slow
def test_record_a_hung_step_is_noticed_stopped_and_exits_1(recordings: dict[str, Finished]) -> None:
    code, err, rows = recordings["hang"].checked()
    assert code == 1
    said = events(rows, "error", NOT_RESPONDING)
    assert len(said) == 1 and re.match(r"workload process not responding for \d+ s", said[0]["event_message"])
    assert (
        err.strip().splitlines()[-1].startswith("gpudash: error: workload failed: workload process not responding for")
    )
    # no sample counts the hung step; whether a window closed in the four steps before it is the
    # machine's speed (on a quiet one they can all fall in the first 0.05 s window)
    assert all(0 < int(r["steps"]) <= 4 for r in samples(rows))
    assert "hanging at step 5" in recordings["hang"].csv.with_suffix(".log").read_text()
    stopped = events(rows, "stopped")
    assert rows[-1] == stopped[0]
    assert re.match(
        r"workload terminated after \d+\.\d s of stopping: it did not stop by itself in that time "
        r"\(workload process killed by SIGTERM\)$",
        stopped[0]["event_message"],
    )


@pytest.mark.slow  # the recordings fixture starts every fault run
def test_record_goes_on_without_gpu_columns_when_nvml_loses_the_gpu(recordings: dict[str, Finished]) -> None:
    run = recordings["nvml"]
    code, err, rows = run.checked()
    assert code == 0, err
    lost = events(rows, "error", NVML_LOST)
    assert len(lost) == 1 and "the GPU has fallen off the bus" in lost[0]["event_message"]
    at = rows.index(lost[0])
    before, after = samples(rows[:at]), samples(rows[at:])
    assert all(float(r["power_w"]) == 250.0 for r in before)  # (the loss may come before torch has loaded)
    assert after, "the workload runs on after the loss"
    assert all(r["power_w"] == "" and r["gpu_util_pct"] == "" for r in after)
    meta = json.loads(run.csv.with_suffix(".json").read_text())
    assert meta["nvml_unavailable"] == lost[0]["event_message"] and meta["exit_code"] == 0


@pytest.mark.slow
def test_record_counts_the_samples_a_slow_parent_made_the_workload_drop(recordings: dict[str, Finished]) -> None:
    code, err, rows = recordings["slow"].checked()
    assert code == 0, err
    dropped = events(rows, "error", SAMPLES_DROPPED)
    assert len(dropped) == 1
    n = int(dropped[0]["event_message"].split()[0])
    assert n > 0 and "samples dropped over" in dropped[0]["event_message"]
    steps = [int(r["steps"]) for r in samples(rows)]
    assert steps == sorted(steps) and steps[-1] == SLOW_PARENT_STEPS  # cumulative: the run's --steps, none missing
    jumps = [later - earlier for earlier, later in zip(steps, steps[1:], strict=False)]
    assert max(jumps) >= n  # where the dropped samples were: one larger step in the totals


@pytest.mark.slow  # the recordings fixture starts every fault run
def test_record_a_failing_csv_write_keeps_every_row_before_it_and_exits_1(recordings: dict[str, Finished]) -> None:
    run = recordings["csv"]
    code, err, rows = run.checked()
    assert code == 1
    assert len(rows) == 7  # the rows before the 8th, each whole
    assert f"gpudash: error: cannot write {run.csv.name}: Input/output error (injected" in err
    meta = json.loads(run.csv.with_suffix(".json").read_text())
    assert meta["exit_code"] == 1 and meta["rows"] == 7 and meta["status"].startswith("write failed")
