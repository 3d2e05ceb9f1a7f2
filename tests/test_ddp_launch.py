"""Data-parallel runs started by the launcher on the CPU (gloo): ``--record --nproc 2`` counts the global
batch, a killed rank or a rank that raises ends the run with a clear message and no process left,
bad layouts are refused, a profiler window keeps the ranks in step, the memory guard is divided
before the ranks start (the ranks themselves: tests/test_ddp.py)."""

from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpudash.core.proctree import alive, children, command_line, parent_of
from tests.helpers import act_when, record_args
from tests.test_ddp import ROOT


# -- the command line ----------------------------------------------------------------------------
def _gpudash(*args: str, cwd: Path, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH"))))}
    return subprocess.run(
        [sys.executable, "-m", "gpudash", *args], capture_output=True, text=True, cwd=cwd, timeout=timeout, env=env
    )


@pytest.mark.slow
def test_record_with_two_ranks_counts_the_global_batch_and_names_the_slowest_rank(tmp_path: Path) -> None:
    out = _gpudash(
        *record_args("run.csv", "--nproc", "2", "--image-size", "16", "-b", "4", "--duration", "4", "-q"), cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr
    rows = list(csv.DictReader((tmp_path / "run.csv").open()))
    started = next(r for r in rows if r["event_kind"] == "started")
    assert "on 2 ranks" in started["event_message"]
    samples = [r for r in rows if r["row_kind"] == "sample"]
    assert samples and all(int(r["samples"]) == 8 * int(r["steps"]) for r in samples)  # 2 ranks x batch 4


def _spawned_children(pid: int) -> list[int]:
    """The direct children of ``pid`` that multiprocessing spawned (not its resource tracker)."""
    commands = {kid: command_line(kid) or "" for kid in children(pid)}
    return [kid for kid, command in commands.items() if "spawn_main" in command and "resource_tracker" not in command]


def kill_a_rank(args: list[str], cwd: Path) -> tuple[int, str, set[int]]:
    """``gpudash --record run.csv ARGS --nproc 2`` until the ranks train, then SIGKILL rank 1:
    (gpudash's exit status, its stderr, every process below it before the kill)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH"))))}
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpudash", "--record", "run.csv", *args, "--nproc", "2", "--duration", "120", "-q"],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    everyone: set[int] = set()

    def kill_rank_1() -> None:
        (agent,) = _spawned_children(proc.pid)  # the workload process: torchrun's agent
        ranks = _spawned_children(agent)
        assert len(ranks) == 2, ranks
        everyone.update(children(proc.pid, recursive=True))
        os.kill(ranks[1], signal.SIGKILL)

    csv = cwd / "run.csv"
    err = act_when(proc, lambda: csv.exists() and "\nsample," in csv.read_text(), kill_rank_1, wait_s=120)  # it trains
    return proc.returncode, err, everyone


@pytest.mark.slow
def test_killing_one_rank_ends_the_run_with_a_clear_message_and_no_process_left(tmp_path: Path) -> None:
    code, err, everyone = kill_a_rank(
        ["-w", "sync_loss", "-v", "fixed", "--device", "cpu", "--image-size", "16"], tmp_path
    )
    assert code == 1 and "rank 1 killed by SIGKILL" in err, err
    time.sleep(1.0)
    assert not [p for p in everyone if alive(p)]
    rows = list(csv.DictReader((tmp_path / "run.csv").open()))
    assert any(r["row_kind"] == "sample" for r in rows)  # nothing recorded was lost


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--nproc", "0"], "--nproc"),
        (["--nproc", "-1"], "--nproc"),
        (["--nproc", "3", "--device", "cuda"], "no CUDA GPU found"),  # this machine has none
        (["--nnodes", "2"], "needs --rdzv-endpoint"),
        (["--knob", "ddp_torch_defaults"], "needs --nproc 2 or more"),
        (["--nproc", "2", "--device", "cpu", "-v", "fixed", "--knob", "compile"], "not supported with --nproc > 1"),
    ],
)
def test_bad_data_parallel_layouts_are_one_line_and_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    out = _gpudash("--record", "x.csv", "-w", "sync_loss", *args, cwd=tmp_path, timeout=60)
    assert out.returncode == 2 and message in out.stderr, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_more_ranks_than_gpus_is_refused_naming_both(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpudash.cli import argtypes

    monkeypatch.setattr(argtypes, "cuda_devices", lambda: (2, ""))
    with pytest.raises(argtypes.UsageError, match="--nproc 3 needs 3 GPUs, one per rank; this machine has 2"):
        argtypes.check_parallel(3, 1, None, "cuda")
    argtypes.check_parallel(2, 1, None, "auto")  # two GPUs, two ranks: fine
    with pytest.raises(argtypes.UsageError, match="use --device cuda, not cuda:1"):
        argtypes.check_parallel(2, 1, None, "cuda:1")


@pytest.mark.slow
def test_a_profiler_window_in_a_data_parallel_run_keeps_the_ranks_in_step(tmp_path: Path) -> None:
    out = _gpudash(
        *record_args("run.csv", "--nproc", "2", "--image-size", "16", "--duration", "8"),
        *("--trace-every", "2", "--trace-steps", "4", "-q"),
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    rows = list(csv.DictReader((tmp_path / "run.csv").open()))
    windows = [r for r in rows if r["event_what"] == "trace" and r["event_kind"] == "measured"]
    assert windows  # rank 0 profiled while rank 1 took the same steps
    last_window = max(float(r["time_s"]) for r in windows)
    assert any(r["row_kind"] == "sample" and float(r["time_s"]) > last_window for r in rows)  # and it went on


@pytest.mark.slow
def test_a_ranks_exception_is_named_in_the_runs_crash() -> None:
    from gpudash.core.protocol import Event, EventKind, RunConfig
    from gpudash.host.runner import WorkloadRunner

    # a knob value the CLI would refuse, given straight to the runner: every rank raises while building
    runner = WorkloadRunner(
        RunConfig(workload="sync_loss", variant="fixed", device="cpu", image_size=16, knobs="ddp_no_sync=3", nproc=2)
    )
    runner.start()
    crashes: list[Event] = []
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline and not runner.finished:
            crashes += [m for m in runner.poll() if isinstance(m, Event) and m.kind == EventKind.CRASHED]
            time.sleep(0.2)
    finally:
        runner.stop()
    assert crashes and "data-parallel run failed: rank" in crashes[0].message
    assert "knob ddp_no_sync takes one of: off, 2, 4, 8; got '3'" in crashes[0].message


def _data_limit(pid: int) -> int:
    """A process's soft RLIMIT_DATA in bytes, as /proc shows it."""
    with open(f"/proc/{pid}/limits") as f:
        line = next(line for line in f if line.startswith("Max data size"))
    return int(line.split()[3])


@pytest.mark.slow
def test_the_nodes_memory_guard_is_divided_before_the_ranks_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The launcher and each rank get a third of a 12 GiB guard from the start (issue 23, cause 1:
    each rank started under the whole guard, divided only after it had imported torch)."""
    from gpudash.core.protocol import EventKind, RunConfig
    from gpudash.host.runner import WorkloadRunner
    from tests.test_orphans import until_event

    monkeypatch.setenv("GPUDASH_MEMORY_LIMIT", "12G")
    runner = WorkloadRunner(
        RunConfig(workload="sync_loss", variant="fixed", device="cpu", image_size=16, nproc=2, watchdog_s=None),
        log_path=tmp_path / "run.log",
    )
    runner.start()
    try:
        until_event(runner, EventKind.STARTED)
        launcher = runner.pid
        assert launcher is not None
        ranks = children(launcher)
        limits = {pid: _data_limit(pid) for pid in [launcher, *ranks]}
    finally:
        runner.stop()
    assert len(ranks) >= 2
    assert set(limits.values()) == {12 * 2**30 // 3}, limits


def test_parent_of_reads_a_processs_parent() -> None:
    assert parent_of(os.getpid()) == os.getppid()
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"]) as kid:
        try:
            assert parent_of(kid.pid) == os.getpid()
        finally:
            kid.kill()
    assert parent_of(2**22 + 1) is None  # above pid_max: never a process
