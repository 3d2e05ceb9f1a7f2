"""``gpudash tune`` for real on the CPU: the loss check of a knobbed run against a plain one, whole races
(the winner and the command that runs it, your own workload, Ctrl-C), the dashboard's tune job
(the race's order of work on scripted speeds: tests/test_tune.py)."""

from __future__ import annotations

import csv
import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from gpudash.core.protocol import LOSS_EFFECT, Event, EventKind, LossEffect, RunConfig
from gpudash.engine.builders import workload_builder
from gpudash.engine.loop import StepLoop
from tests import printed
from tests.helpers import act_when, once_per_session
from tests.test_record import gpudash
from tests.test_tune import ROOT
from workloads.base import Workload, WorkloadOptions
from workloads.factory import build
from workloads.knobs import Knobs


# -- the correctness guard -----------------------------------------------------------------------
def _loss_effect(knobs: Knobs, on_built: Callable[[], object] = lambda: None) -> Event:
    config = RunConfig(workload="sync_loss", variant="fixed", batch_size=4, device="cpu", seed=3)
    w = build("sync_loss", "cpu", WorkloadOptions(variant="fixed", batch_size=4, seed=3, knobs=knobs))
    on_built()
    got: list[object] = []
    pending = [LossEffect(12)]

    def controls(_timeout: float) -> LossEffect | None:
        return pending.pop() if pending and loop.steps_issued >= 2 else None

    loop = StepLoop(
        w, emit=got.append, controls=controls, sample_interval_s=0.1, builder=workload_builder(config, w.device)
    )
    loop.run(steps=6)
    w.close()
    (event,) = [m for m in got if isinstance(m, Event) and m.what == LOSS_EFFECT]
    assert loop.steps_done == 6  # the copies' steps are not the run's
    return event


@pytest.mark.slow
def test_the_loss_check_trains_a_plain_and_a_knobbed_copy_on_the_same_batches() -> None:
    bf16 = _loss_effect(Knobs({"amp": "bf16"}))
    assert bf16.kind == EventKind.MEASURED, bf16.message
    d = bf16.details
    assert d["steps"] == "12" and float(d["plain_loss"]) > 0
    assert 0 < abs(float(d["diff_pct"])) < 5  # bf16 moves the loss, a little
    layout = _loss_effect(Knobs({"channels_last": "on"}))
    assert abs(float(layout.details["diff_pct"])) < 0.01  # a layout keeps the arithmetic
    assert "plain" in layout.message and "with channels_last=on" in layout.message


@pytest.mark.slow
def test_the_loss_check_of_a_compiled_run_compiles_nothing_again() -> None:
    """The knobbed arm runs on the running workload (``workloads.fresh_start``): a fresh copy's
    second compile took 22 s of ResNet-50's loss check on an H100."""
    from torch._dynamo.utils import counters

    graphs = []
    event = _loss_effect(
        Knobs({"compile": "default"}), on_built=lambda: graphs.append(counters["stats"]["unique_graphs"])
    )
    assert event.kind == EventKind.MEASURED, event.message
    assert abs(float(event.details["diff_pct"])) < 1  # compiled float32 against eager: the same training
    assert graphs[0] >= 1 and counters["stats"]["unique_graphs"] == graphs[0]


@pytest.mark.parametrize(
    ("device", "knobs"), [("cpu", Knobs()), pytest.param("cuda", Knobs({"cuda_graph": "on"}), marks=pytest.mark.gpu)]
)
def test_the_loss_check_reads_each_steps_own_loss(device: str, knobs: Knobs) -> None:
    """The check reads its losses back together after its steps; a captured graph writes every
    step's loss into one tensor, so each must be copied as it comes (else each reads as the last)."""
    import torch

    from gpudash.engine.measure_windows import step_losses

    def fresh() -> Workload:
        return build("sync_loss", device, WorkloadOptions(variant="fixed", batch_size=4, seed=3, knobs=knobs))

    one_by_one = fresh()
    expected = []
    for _ in range(8):
        one_by_one.step()
        expected.append(float(one_by_one.last_loss))  # type: ignore[arg-type]  # a tensor after a step
    got = step_losses(torch, fresh(), 8)
    assert got == pytest.approx(expected, rel=1e-6, abs=0)
    assert len(set(got)) > 1  # the losses move (sync_loss's by about 1e-4 over 8 steps)


def test_the_loss_check_without_a_knob_says_there_is_nothing_to_compare() -> None:
    event = _loss_effect(Knobs())
    assert event.kind == EventKind.ERROR and "no knob is on" in (event.message or "")


# -- whole races on the CPU ----------------------------------------------------------------------
def _rows(out: Path, kind: str) -> list[dict[str, str]]:
    with open(out / "tune.csv", newline="") as f:
        return [r for r in csv.DictReader(f) if r["row_kind"] == kind]


SHORT = ["--device", "cpu", "--seconds", "0.5", "--warmup", "0.2"]  # a change's cost is timed apart from its warm-up


def _tune(workload: str, tmp_path: Path, *more: str) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """A short race of ``workload`` on the CPU that finished (exit 0): its folder and its process.
    Windows of 0.5 s, 0.2 s of warm-up after each change; ``more``: tune's other arguments."""
    out = tmp_path / "tune"
    r = gpudash("tune", "-w", workload, *SHORT, *more, "--out", str(out), "-q", cwd=tmp_path, timeout=400)
    assert r.returncode == 0, r.stderr
    return out, r


RACED_KNOBS = "channels_last,cuda_graph,compile"  # a layout, one refused on the CPU, one compiled (named: raced)


def sync_loss_race(factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """One race of sync_loss on the CPU that finished, shared by the tests here and in
    test_tune_time.py (once per session): its folder and its stdout."""

    def race() -> tuple[Path, str]:
        out, r = _tune("sync_loss", factory.mktemp("race"), "--knobs", RACED_KNOBS)
        return out, r.stdout

    return once_per_session(factory, "test_tune_runs-sync_loss", race)


@pytest.mark.slow
def test_tune_names_the_fastest_configuration_and_the_command_that_runs_it(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    out, stdout = sync_loss_race(tmp_path_factory)
    answer = json.loads((out / "tune.json").read_text())["answer"]
    winner = answer["winner"]
    candidates = _rows(out, "candidate")
    assert candidates[0]["candidate"] == winner and candidates[0]["fate"] == "the winner"
    assert {c["candidate"] for c in candidates} >= {"sync-heavy", "fixed"}
    assert all(c["fate"] for c in candidates)  # every candidate's fate is said
    md = (out / "tune.md").read_text()
    if winner != "sync-heavy":  # (on two loaded cores the plain variant can win)
        assert answer["vs_plain"]["base"] == "sync-heavy", md
        # with its interval, unless a loaded machine left the winner's windows without one (said so)
        assert answer["vs_plain"]["low"] is not None or (f"`{winner}`** at batch 4: " in md and "(no CI)" in md), md
    assert answer["diagnosis_before"]["bound"] and answer["diagnosis_after"]["bound"]
    assert answer["command"] in md and "## Every candidate" in md and (out / "tune.png").stat().st_size > 0
    assert "knob cuda_graph: it needs CUDA (on cpu)" in md  # not tried, with the reason
    # where the time went: each part in seconds, measuring among them, the parts within the run's time
    spent = printed.time_account(md)
    elapsed = json.loads((out / "tune.json").read_text())["elapsed_s"]
    assert spent["measuring"] > 0 and sum(spent.values()) <= elapsed + 0.5, md
    assert stdout.splitlines()[-1] == f"run it: {answer['command']}"
    # the command runs the winner: recorded headless, it trains that variant with those knobs
    argv = answer["command"].split()[1:]
    rec = gpudash(*argv, "--record", str(tmp_path / "w.csv"), "--steps", "5", "-q", cwd=tmp_path, timeout=200)
    assert rec.returncode == 0, rec.stderr
    with open(tmp_path / "w.csv", newline="") as f:
        sample = next(row for row in csv.DictReader(f) if row["row_kind"] == "sample")
    label = sample["variant"] + ("" if sample["knobs"] == "none" else "+" + sample["knobs"].replace(",", "+"))
    assert label.replace("=on", "") == winner


@pytest.fixture(scope="module")
def stopped_race(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int, str]:
    """One race of a user's own workload (``file.py:function``), stopped by Ctrl-C once it has
    measured 3 windows: its folder, exit status and stderr (once per session)."""

    def race() -> tuple[Path, int, str]:
        out = tmp_path_factory.mktemp("tune") / "int"
        argv = [sys.executable, "-m", "gpudash", "tune", "-w", f"{ROOT}/examples/mine.py:workload", *SHORT]
        argv += ["--out", str(out), "-q"]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=out.parent)

        def three_windows() -> bool:
            return (out / "tune.csv").exists() and len(_rows(out, "window")) >= 3

        err = act_when(proc, three_windows, lambda: proc.send_signal(signal.SIGINT), wait_s=240, end_s=60)
        return out, proc.returncode, err

    return once_per_session(tmp_path_factory, "test_tune_runs-stopped", race)


@pytest.mark.slow
def test_a_users_own_workload_is_tuned_like_a_family(stopped_race: tuple[Path, int, str]) -> None:
    out, _, err = stopped_race
    answer = json.loads((out / "tune.json").read_text())["answer"]
    assert answer["command"].startswith(f"gpudash -w {ROOT}/examples/mine.py:workload -v "), err
    assert len(_rows(out, "window")) >= 3


@pytest.mark.slow
def test_ctrl_c_keeps_every_finished_window_and_writes_the_report(stopped_race: tuple[Path, int, str]) -> None:
    out, code, err = stopped_race
    assert code == 130, err
    windows = _rows(out, "window")
    assert len(windows) >= 2 and all(w["samples_per_s"] for w in windows)
    assert "interrupted by SIGINT" in (out / "tune.md").read_text()
    meta = json.loads((out / "tune.json").read_text())
    assert meta["exit_code"] == 130
    assert meta["answer"]["winner"] in {w["candidate"] for w in windows}  # the fastest of what was measured


def test_the_dashboards_tune_budget_is_checked_at_the_prompt() -> None:
    from gpudash.tune.job import parse_minutes

    assert parse_minutes("") == 5.0 and parse_minutes(" 2.5 ") == 2.5
    for text, why in (("soon", "expected a number of minutes"), ("0.1", "0.5 to 120"), ("500", "0.5 to 120")):
        with pytest.raises(ValueError, match=why):
            parse_minutes(text)


def test_a_dashboard_tune_that_fails_says_why_in_one_line(tmp_path: Path) -> None:
    """The job's child refuses its arguments (exit 2): the dashboard gets tune's own one line."""
    from gpudash.tune.job import TuneJob, TuneRequest

    job = TuneJob(TuneRequest(workload="no_such_family", batch_size=8, device="cpu"), tmp_path / "t")
    job.start()
    deadline = time.monotonic() + 60
    while job.running and time.monotonic() < deadline:
        time.sleep(0.1)
    result = job.result()
    assert isinstance(result, str) and result.startswith("tune found no winner: ")
    assert "no_such_family" in result and "\n" not in result
