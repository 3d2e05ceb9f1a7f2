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
from tests.helpers import ROOT, once_per_session
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


# a tracked loop without torch (the tracker's side is what these tests watch): it runs until it is
# killed (at most 5 minutes) and marks "lr 0.01" once the test creates the file ``mark``
TRACKED = """
import pathlib, time, gpudash
marked, end = False, time.monotonic() + 300
with gpudash.track("run.csv", label="mlp", interval_s=0.1) as t:
    while time.monotonic() < end:
        time.sleep(0.005)
        t.step(samples=128)
        if not marked and pathlib.Path("mark").exists():
            t.mark("lr 0.01")
            marked = True
"""


def start_tracked(cwd: Path) -> subprocess.Popen[str]:
    """``TRACKED`` in ``cwd``, running, with Ctrl-C's default: a test run started in the background
    (``pytest &``) ignores SIGINT, and Python then leaves it ignored in the script."""
    return subprocess.Popen(
        [sys.executable, "-c", TRACKED],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def wait_for(cond, what: str, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < deadline, f"no {what} after {timeout_s:g} s"
        time.sleep(0.05)


def sample_rows(path: Path) -> int:
    return path.read_text().count("\nsample,") if path.exists() else 0


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["ctrl-c", "kill"])
def test_an_interrupted_or_killed_script_leaves_a_whole_file(tmp_path, sig):
    proc = start_tracked(tmp_path)
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
        [sys.executable, str(EXAMPLE), "run.csv", "--seconds", "2"],  # 1 s a learning rate: two 0.5 s windows each
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    run = load_run(tmp_path / "run.csv")
    assert [c.key[:2] for c in run.configs] == [("mlp", "start"), ("mlp", "lr 0.01")]


@pytest.mark.slow
async def test_replay_follow_shows_the_tracked_script_while_it_runs(tmp_path):
    from gpudash.tui.app import GpuDashApp
    from gpudash.tui.charts import MetricChart
    from tests.tui.conftest import wait_until

    proc = start_tracked(tmp_path)
    try:
        wait_for(lambda: (tmp_path / "run.csv").exists(), "run.csv")
        app = GpuDashApp(ReplaySource(tmp_path / "run.csv", follow=True), clock=time.monotonic, toasts=False)
        async with app.run_test(size=(120, 36)) as pilot:
            await wait_until(pilot, lambda: app.state.last_sample is not None, "a sample", 60)
            assert proc.poll() is None  # shown while the script still writes
            first = app.state.last_sample
            assert first is not None and first.workload == "mlp" and app.state.run.workload == "mlp"
            chart = app.query_one("#chart-throughput", MetricChart)
            (tmp_path / "mark").touch()  # the script marks "lr 0.01" now

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
    proc = start_tracked(tmp_path)
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
        (tmp_path / "mark").touch()  # the script marks "lr 0.01" now
        wait_for(lambda: "lr 0.01" in tmux(socket, "capture-pane", "-p", "-t", "dash"), "the mark on the screen", 60)
        assert proc.poll() is None
    finally:
        tmux(socket, "kill-server")
        proc.kill()
        proc.communicate()


# one gloo job of 2 ranks tracked twice: by rank 0 alone into rank-0/run.csv, then by each rank into
# per-rank/run.rankN.csv (torch only in the ranks)
DDP_SCRIPT = """
import multiprocessing, os, time
import gpudash

def rank(r, init):
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method=init, rank=r, world_size=2)
    for mode in ("rank-0", "per-rank"):
        with gpudash.track(f"{mode}/run.csv", per_rank=mode == "per-rank", interval_s=0.05) as t:
            for _ in range(40):
                time.sleep(0.005)
                t.step(samples=4)
            print(mode, r, t.path, flush=True)
        dist.barrier()
    dist.destroy_process_group()

if __name__ == "__main__":
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=rank, args=(r, f"file://{os.path.abspath('rendezvous')}")) for r in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    raise SystemExit(max(p.exitcode for p in procs))
"""


@pytest.fixture(scope="module")
def gloo_job(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """``DDP_SCRIPT`` run: its folder and outcome."""

    def run() -> tuple[Path, subprocess.CompletedProcess[str]]:
        cwd = tmp_path_factory.mktemp("gloo")
        (cwd / "job.py").write_text(DDP_SCRIPT)
        for mode in ("rank-0", "per-rank"):
            (cwd / mode).mkdir()
        return cwd, subprocess.run([sys.executable, "job.py"], cwd=cwd, capture_output=True, text=True, timeout=240)

    return once_per_session(tmp_path_factory, "test_track_script-gloo", run)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["rank-0", "per-rank"])
def test_a_gloo_job_writes_rank_0_or_each_rank(gloo_job, mode):
    cwd, proc = gloo_job
    assert proc.returncode == 0, proc.stderr
    folder = cwd / mode
    csvs = sorted(p.name for p in folder.glob("*.csv"))
    if mode == "rank-0":
        assert csvs == ["run.csv"] and "rank-0 1 None" in proc.stdout
        paths = [folder / "run.csv"]
    else:
        assert csvs == ["run.rank0.csv", "run.rank1.csv"]
        paths = [folder / name for name in csvs]
    for path in paths:
        last = samples(messages(path))[-1]
        assert (last.steps, last.samples, last.world_size) == (40, 160, 2)
