"""``gpudash.track()`` in a script of its own: importing it costs no torch, a script that never closes or
raises still ends its file, a killed or interrupted script leaves a whole file, ``gpudash replay
--follow`` shows it while it runs, and a gloo job writes rank 0 or each rank (the tracker itself:
tests/test_track.py)."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpudash.core.protocol import EventKind
from gpudash.recording.replay import ReplaySource
from gpudash.report.load import load_run
from tests.helpers import ROOT
from tests.test_track import EXAMPLE, events, messages, run_python, samples, whole

# -- the script around it: import cost, exit, Ctrl-C, kill ----------------------------------------------------


def test_import_gpudash_and_a_cpu_tracker_import_no_torch(tmp_path):
    code = (
        "import sys, time, gpudash\n"
        "assert 'gpudash.tracking' not in sys.modules\n"
        "t = gpudash.track('run.csv', interval_s=0.05)\n"
        "for _ in range(20): time.sleep(0.005); t.step()\n"
        "t.close()\n"
        "print(sorted(m for m in ('torch', 'textual', 'numpy') if m in sys.modules))\n"
    )
    proc = run_python(code, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
    assert samples(messages(tmp_path / "run.csv"))[-1].steps == 20


def test_a_script_that_never_closes_is_closed_at_exit(tmp_path):
    code = (
        "import time, gpudash\nt = gpudash.track('run.csv', interval_s=0.05)\n"
        "for _ in range(30): time.sleep(0.005); t.step()\n"
    )
    assert run_python(code, tmp_path).returncode == 0
    msgs = messages(tmp_path / "run.csv")
    assert events(msgs)[-1].kind == EventKind.STOPPED and samples(msgs)[-1].steps == 30


def test_a_loop_that_raises_ends_the_file_with_a_crashed_row(tmp_path):
    code = (
        "import time, gpudash\nt = gpudash.track('run.csv', interval_s=0.05)\n"
        "for i in range(30): time.sleep(0.005); t.step()\nraise RuntimeError('CUDA out of memory')\n"
    )
    proc = run_python(code, tmp_path)
    assert proc.returncode == 1 and "RuntimeError: CUDA out of memory" in proc.stderr
    last = events(messages(tmp_path / "run.csv"))[-1]
    assert (
        last.kind == EventKind.CRASHED and last.message == "the training loop raised RuntimeError: CUDA out of memory"
    )


def start_example(cwd: Path, seconds: float = 60.0) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(EXAMPLE), "run.csv", "--seconds", str(seconds)],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for(cond, what: str, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < deadline, f"no {what} after {timeout_s:g} s"
        time.sleep(0.05)


def sample_rows(path: Path) -> int:
    return path.read_text().count("\nsample,") if path.exists() else 0


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["ctrl-c", "kill"])
def test_an_interrupted_or_killed_script_leaves_a_whole_file(tmp_path, sig):
    proc = start_example(tmp_path)
    try:
        wait_for(lambda: sample_rows(tmp_path / "run.csv") >= 3, "sample rows")
        proc.send_signal(sig)
        code = proc.wait(timeout=60)
    finally:
        proc.kill()
        proc.communicate()
    path = tmp_path / "run.csv"
    rows = whole(path)
    assert path.read_bytes().endswith(b"\n") and sum(r[0] == "sample" for r in rows) >= 3
    last = events(messages(path))[-1]
    if sig == signal.SIGINT:
        assert code == 130 or code == -signal.SIGINT
        assert (last.kind, last.message) == (EventKind.STOPPED, "interrupted (KeyboardInterrupt)")
    else:
        assert code == -signal.SIGKILL and last.kind == EventKind.STARTED  # no end row: cut, but whole


# -- live: gpudash replay --follow while the script writes -----------------------------------------------------


@pytest.mark.slow
def test_the_example_runs_end_to_end_and_reports(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(EXAMPLE), "run.csv", "--seconds", "4"], cwd=tmp_path, capture_output=True, text=True
    )
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    run = load_run(tmp_path / "run.csv")
    assert [c.key[:2] for c in run.configs] == [("mlp", "start"), ("mlp", "lr 0.01")]


@pytest.mark.slow
async def test_replay_follow_shows_the_tracked_script_while_it_runs(tmp_path):
    from gpudash.tui.app import GpuDashApp
    from gpudash.tui.charts import MetricChart
    from tests.tui.conftest import wait_until

    proc = start_example(tmp_path, seconds=12)
    try:
        wait_for(lambda: (tmp_path / "run.csv").exists(), "run.csv")
        app = GpuDashApp(ReplaySource(tmp_path / "run.csv", follow=True), clock=time.monotonic, toasts=False)
        async with app.run_test(size=(120, 36)) as pilot:
            await wait_until(pilot, lambda: app.state.last_sample is not None, "a sample", 60)
            assert proc.poll() is None  # shown while the script still writes
            first = app.state.last_sample
            assert first is not None and first.workload == "mlp" and app.state.run.workload == "mlp"
            chart = app.query_one("#chart-throughput", MetricChart)

            def marked() -> bool:
                app.refresh_now()
                return any("lr 0.01" in label for _, label in chart.marker_labels)

            await wait_until(pilot, marked, "the mark on the throughput chart", 60)
            assert proc.poll() is None

            def steps() -> int:
                last = app.state.last_sample
                return last.steps if last is not None else 0

            seen = steps()
            await wait_until(pilot, lambda: steps() > seen, "rows after the mark", 30)
    finally:
        proc.kill()
        proc.communicate()


def tmux(socket: str, *args: str) -> str:
    return subprocess.run(["tmux", "-L", socket, *args], capture_output=True, text=True).stdout


@pytest.mark.slow
@pytest.mark.skipif(subprocess.run(["which", "tmux"], capture_output=True).returncode != 0, reason="needs tmux")
def test_replay_follow_in_a_terminal_shows_the_script_live(tmp_path):
    """As a user would: the script in the background, ``gpudash replay --follow`` in a terminal (tmux)."""
    proc = start_example(tmp_path, seconds=16)
    socket = f"gpudash-track-{os.getpid()}"
    env = f"XDG_CONFIG_HOME={shlex.quote(str(tmp_path / 'config'))} PYTHONPATH={shlex.quote(str(ROOT))}"
    command = f"exec env {env} {shlex.join([sys.executable, '-m', 'gpudash', 'replay', '--follow', 'run.csv'])}"
    try:
        wait_for(lambda: (tmp_path / "run.csv").exists(), "run.csv")
        tmux(socket, "new-session", "-d", "-s", "dash", "-c", str(tmp_path), "-x", "120", "-y", "36", command)
        screen = ""

        def shows_it() -> bool:
            nonlocal screen
            screen = tmux(socket, "capture-pane", "-p", "-t", "dash")
            return "mlp" in screen and "steps/s" in screen and "start" in screen

        wait_for(shows_it, "the tracked run on the screen", 90)
        assert proc.poll() is None, screen  # live: the script is still training
        wait_for(lambda: "lr 0.01" in tmux(socket, "capture-pane", "-p", "-t", "dash"), "the mark on the screen", 60)
        assert proc.poll() is None
    finally:
        tmux(socket, "kill-server")
        proc.kill()
        proc.communicate()


DDP_SCRIPT = """
import os, sys, time
import torch, torch.distributed as dist, torch.multiprocessing as mp
import gpudash

def rank(r, init, per_rank):
    dist.init_process_group("gloo", init_method=init, rank=r, world_size=2)
    with gpudash.track("run.csv", per_rank=per_rank, interval_s=0.05) as t:
        for _ in range(40):
            time.sleep(0.005)
            t.step(samples=4)
        print(r, t.path, flush=True)
    dist.barrier()
    dist.destroy_process_group()

if __name__ == "__main__":
    per_rank = sys.argv[1] == "per-rank"
    mp.spawn(rank, args=(f"file://{os.path.abspath('rendezvous')}", per_rank), nprocs=2)
"""


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["rank-0", "per-rank"])
def test_a_gloo_job_writes_rank_0_or_each_rank(tmp_path, mode):
    (tmp_path / "job.py").write_text(DDP_SCRIPT)
    proc = subprocess.run([sys.executable, "job.py", mode], cwd=tmp_path, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr
    csvs = sorted(p.name for p in tmp_path.glob("*.csv"))
    if mode == "rank-0":
        assert csvs == ["run.csv"] and "1 None" in proc.stdout
        paths = [tmp_path / "run.csv"]
    else:
        assert csvs == ["run.rank0.csv", "run.rank1.csv"]
        paths = [tmp_path / name for name in csvs]
    for path in paths:
        last = samples(messages(path))[-1]
        assert (last.steps, last.samples, last.world_size) == (40, 160, 2)
