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
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import pytest

from gpudash.core.proctree import alive, children, command_line, parent_of
from tests.helpers import act_when, checkout_first_on_path, needs_two_cpus, once_per_session, record_args
from tests.test_ddp import ROOT
from tests.test_orphans import START_TIMEOUT_S


# -- the command line ----------------------------------------------------------------------------
def _gpudash(*args: str, cwd: Path, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": checkout_first_on_path()}
    return subprocess.run(
        [sys.executable, "-m", "gpudash", *args], capture_output=True, text=True, cwd=cwd, timeout=timeout, env=env
    )


# one recording of 2 ranks for what it counts and its profiler windows (one a second): Ctrl-C once a
# window is measured and a sample follows it (a wait on rows: on a loaded machine a window can outlast
# any fixed duration)
TRACED = "--nproc 2 --image-size 16 -b 4 --duration 600 --trace-every 1 --trace-steps 4 -q".split()


class Traced(NamedTuple):
    """The traced recording: gpudash's exit status and stderr, and the CSV's rows."""

    code: int
    err: str
    rows: list[dict[str, str]]


def _rows(path: Path) -> list[dict[str, str]]:
    """The CSV's rows (none before it exists)."""
    if not path.exists():
        return []
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def _windows(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    """The profiler windows' "measured" event rows."""
    return [r for r in rows if r["event_what"] == "trace" and r["event_kind"] == "measured"]


def _sampled_after_a_window(rows: list[dict[str, str]]) -> bool:
    """A profiler window was measured, and a sample row came after it."""
    windows = _windows(rows)
    return bool(windows) and any(r["row_kind"] == "sample" for r in rows[rows.index(windows[0]) :])


@pytest.fixture(scope="module")
def traced_run(tmp_path_factory: pytest.TempPathFactory) -> Traced:
    def record() -> Traced:
        cwd = tmp_path_factory.mktemp("traced")
        env = {**os.environ, "PYTHONPATH": checkout_first_on_path()}
        argv = [sys.executable, "-m", "gpudash", *record_args("run.csv", *TRACED)]
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        csv_path = cwd / "run.csv"
        err = act_when(
            proc,
            lambda: _sampled_after_a_window(_rows(csv_path)),
            lambda: proc.send_signal(signal.SIGINT),
            wait_s=START_TIMEOUT_S,
        )
        return Traced(proc.returncode, err, _rows(csv_path))

    return once_per_session(tmp_path_factory, "test_ddp_launch-traced", record)


@pytest.mark.slow
@needs_two_cpus
def test_record_with_two_ranks_counts_the_global_batch_and_names_the_slowest_rank(traced_run: Traced) -> None:
    code, err, rows = traced_run
    ended = [r["event_kind"] for r in rows if r["row_kind"] == "event" and r["event_kind"] in ("stopped", "crashed")]
    assert code == 130 and "stopped" in ended and "crashed" not in ended, (ended, err)  # Ctrl-C: stopped
    started = next(r for r in rows if r["event_kind"] == "started")
    assert "on 2 ranks" in started["event_message"]
    samples = [r for r in rows if r["row_kind"] == "sample"]
    assert samples and all(int(r["samples"]) == 8 * int(r["steps"]) for r in samples)  # 2 ranks x batch 4


def _spawned_children(pid: int) -> list[int]:
    """The direct children of ``pid`` that multiprocessing spawned (not its resource tracker)."""
    commands = {kid: command_line(kid) or "" for kid in children(pid)}
    return [kid for kid, command in commands.items() if "spawn_main" in command and "resource_tracker" not in command]


def kill_a_rank(
    args: list[str],
    cwd: Path,
    env: dict[str, str] | None = None,
    look: Callable[[int, list[int]], object] | None = None,
) -> tuple[int, str, set[int]]:
    """``gpudash --record run.csv ARGS --nproc 2`` until the ranks train, then SIGKILL rank 1:
    (gpudash's exit status, its stderr, every process below it before the kill). ``env``: more
    environment; ``look(launcher, its children)`` is called just before the kill."""
    env = {**os.environ, **(env or {})}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(ROOT), env.get("PYTHONPATH"))))
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
        if look is not None:
            look(agent, children(agent))
        os.kill(ranks[1], signal.SIGKILL)

    csv = cwd / "run.csv"
    err = act_when(proc, lambda: csv.exists() and "\nsample," in csv.read_text(), kill_rank_1, wait_s=120)  # it trains
    return proc.returncode, err, everyone


def _data_limit(pid: int) -> int:
    """A process's soft RLIMIT_DATA in bytes, as /proc shows it."""
    with open(f"/proc/{pid}/limits") as f:
        line = next(line for line in f if line.startswith("Max data size"))
    return int(line.split()[3])


def _left_alive(pids: set[int], timeout: float = 5.0) -> list[int]:
    """Those of ``pids`` still alive after up to ``timeout`` s (none: at once)."""
    deadline = time.monotonic() + timeout
    while (left := [p for p in pids if alive(p)]) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


class KilledRank(NamedTuple):
    """A 2-rank recording under a 12 GiB memory guard whose rank 1 was SIGKILLed while training."""

    code: int  # gpudash's exit status
    err: str  # its stderr
    left: list[int]  # processes below gpudash still alive after it exited
    rows: list[dict[str, str]]  # the CSV's
    ranks: list[int]  # the launcher's children, before the kill
    limits: dict[int, int]  # the launcher's and its children's RLIMIT_DATA, before the kill


@pytest.fixture(scope="module")
def killed_rank(tmp_path_factory: pytest.TempPathFactory) -> KilledRank:
    def run() -> KilledRank:
        cwd = tmp_path_factory.mktemp("killed-rank")
        ranks: list[int] = []
        limits: dict[int, int] = {}

        def look(launcher: int, kids: list[int]) -> None:
            ranks.extend(kids)
            limits.update({pid: _data_limit(pid) for pid in [launcher, *kids]})

        args = ["-w", "sync_loss", "-v", "fixed", "--device", "cpu", "--image-size", "16"]
        code, err, everyone = kill_a_rank(args, cwd, env={"GPUDASH_MEMORY_LIMIT": "12G"}, look=look)
        rows = list(csv.DictReader((cwd / "run.csv").open()))
        return KilledRank(code, err, _left_alive(everyone), rows, ranks, limits)

    return once_per_session(tmp_path_factory, "test_ddp_launch-killed", run)


@pytest.mark.slow
@needs_two_cpus
def test_killing_one_rank_ends_the_run_with_a_clear_message_and_no_process_left(killed_rank: KilledRank) -> None:
    assert killed_rank.code == 1 and "rank 1 killed by SIGKILL" in killed_rank.err, killed_rank.err
    assert killed_rank.left == []
    assert any(r["row_kind"] == "sample" for r in killed_rank.rows)  # nothing recorded was lost


@pytest.mark.slow
@needs_two_cpus
def test_the_nodes_memory_guard_is_divided_before_the_ranks_start(killed_rank: KilledRank) -> None:
    """The launcher and each rank get a third of a 12 GiB guard (GPUDASH_MEMORY_LIMIT) from the start
    (issue 23, cause 1: each rank started under the whole guard, divided only after it had imported torch)."""
    assert len(killed_rank.ranks) >= 2
    assert set(killed_rank.limits.values()) == {12 * 2**30 // 3}, killed_rank.limits


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--nproc", "0"], "--nproc"),
        (["--nproc", "-1"], "--nproc"),
        (["--nproc", "3", "--device", "cuda"], "no CUDA GPU found"),  # this machine has none
        (["--nnodes", "2"], "needs --rdzv-endpoint"),
        (["--knob", "ddp_torch_defaults"], "needs --nproc 2 or more"),
        pytest.param(
            ["--nproc", "2", "--device", "cpu", "-v", "fixed", "--knob", "compile"],
            "not supported with --nproc > 1",
            marks=needs_two_cpus,  # on one CPU the CPU check refuses it first
        ),
    ],
)
def test_bad_data_parallel_layouts_are_one_line_and_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    out = _gpudash("--record", "x.csv", "-w", "sync_loss", *args, cwd=tmp_path, timeout=60)
    assert out.returncode == 2 and message in out.stderr, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_more_ranks_than_gpus_is_refused_naming_both(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpudash.arguments import argtypes

    monkeypatch.setattr(argtypes, "cuda_devices", lambda: (2, ""))
    with pytest.raises(argtypes.UsageError, match="--nproc 3 needs 3 GPUs, one per rank; this machine has 2"):
        argtypes.check_parallel(3, 1, None, "cuda")
    argtypes.check_parallel(2, 1, None, "auto")  # two GPUs, two ranks: fine
    with pytest.raises(argtypes.UsageError, match="use --device cuda, not cuda:1"):
        argtypes.check_parallel(2, 1, None, "cuda:1")


@pytest.mark.slow
@needs_two_cpus
def test_a_profiler_window_in_a_data_parallel_run_keeps_the_ranks_in_step(traced_run: Traced) -> None:
    code, err, rows = traced_run
    assert code == 130, err
    windows = _windows(rows)
    assert windows  # rank 0 profiled while rank 1 took the same steps
    assert _sampled_after_a_window(rows)  # and it went on


@pytest.mark.slow
@needs_two_cpus
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


def test_parent_of_reads_a_processs_parent() -> None:
    assert parent_of(os.getpid()) == os.getppid()
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"]) as kid:
        try:
            assert parent_of(kid.pid) == os.getpid()
        finally:
            kid.kill()
    assert parent_of(2**22 + 1) is None  # above pid_max: never a process
