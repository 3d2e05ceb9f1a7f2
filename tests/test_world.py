"""A data-parallel run's ranks side by side: each rank's window in the recording (``rank`` rows),
where each rank runs (torchrun's run id, node, host), and ``gpudash report`` joining the nodes'
recordings of one run into one world on one clock."""

from __future__ import annotations

import csv
import dataclasses
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpudash.cli.main import main
from gpudash.core.protocol import WORLD, Event, EventKind, GpuReading, GpuSample, RankSample, RunConfig, Sample
from gpudash.core.running import Running
from gpudash.core.world_event import WorldFacts, facts_of
from gpudash.job.step_record import StepRecord
from gpudash.job.steps import LAG_S, JobSamples
from gpudash.ranks.world import JobWorld
from gpudash.recording.csvformat import MEMORY_COLUMNS, OWN_WORK_COLUMNS, RowParser, header, rank_row
from gpudash.recording.metadata import run_metadata
from gpudash.recording.older_events import older_data
from gpudash.recording.record import CsvRecorder
from gpudash.report.load import load_run
from gpudash.report.world import join, markdown
from tests.helpers import act_when

RUN_ID = "run-7f3a"
JOBS = Path(__file__).parent / "data" / "jobs"


def _hello(rank: int, node: int, run_id: str = RUN_ID, host: str = "box") -> dict[str, object]:
    return {"k": "hello", "rank": rank, "node": str(node), "run_id": run_id, "host": host, "pid": 100 + rank}


def test_the_world_event_names_the_run_its_node_and_its_clock_once_for_the_ranks_seen() -> None:
    t0 = time.monotonic() - 5.0  # the session began 5 s ago
    world = JobWorld(t0)
    world.hello(_hello(2, 1, host="node-b"))
    world.hello(_hello(3, 1, host="node-b"))
    before = time.time()
    e = world.event(5.0, 4)
    assert e is not None and e.what == WORLD and e.kind == EventKind.MEASURED
    facts = facts_of(e)
    assert e.data == facts and (e.before, e.after) == ("1", RUN_ID) and facts.host == "node-b"
    assert "ranks 2, 3 of 4" in e.message and facts.ranks == (2, 3) and facts.world_size == 4
    zero = facts.clock_unix
    assert zero is not None and abs(zero - (before - 5.0)) < 0.5  # the Unix time of the session's time 0
    assert e.message == facts.message() and f"time 0 at unix {zero:.3f}" in e.message  # the words, from the data
    assert world.event(6.0, 4) is None  # told once ...
    world.hello(_hello(4, 1, host="node-b"))
    again = world.event(7.0, 4)
    assert again is not None and "ranks 2, 3, 4" in again.message  # ... and again when a rank joins


def test_a_job_that_is_not_torchruns_says_no_world() -> None:
    world = JobWorld(time.monotonic())
    world.hello({"k": "hello", "rank": 0, "pid": 1})  # no run id: python train.py, mp.spawn
    assert world.event(1.0, 1) is None


def test_each_rank_gets_its_window_with_its_node_input_wait_and_exposed_all_reduce() -> None:
    t0 = time.monotonic()
    samples = JobSamples("train.py", "job", 1.0, t0)
    samples.world_size = 2
    for step in range(1, 11):
        t = t0 + 0.05 * step
        samples.add(0, StepRecord(step, t, 50.0, 8, 0, 0.0, None, False, train_s=0.05))
        samples.add(1, StepRecord(step, t, 50.0, 8, 0, 0.03, None, False, train_s=0.05))
    world = JobWorld(t0)
    world.hello(_hello(0, 0))
    world.hello(_hello(1, 0))
    world.traced(0, 0.4)
    assert len(samples.due(t0 + 1.05 + LAG_S)) == 1
    out = world.closed(samples, 1.01)
    told = [m for m in out if isinstance(m, Event)]
    ranks = [m for m in out if isinstance(m, RankSample)]
    assert [e.what for e in told] == [WORLD]
    assert [r.rank for r in ranks] == [0, 1] and all(r.node == 0 for r in ranks)
    assert ranks[0].allreduce_exposed_ms == pytest.approx(0.4) and ranks[1].allreduce_exposed_ms is None
    assert ranks[0].input_wait_pct == pytest.approx(0.0) and ranks[1].input_wait_pct == pytest.approx(60.0)
    assert ranks[1].steps == 10 and ranks[1].steps_per_s == pytest.approx(20.0)
    assert ranks[1].samples_per_s == pytest.approx(160.0)
    assert samples.new_rank_samples == [] and world.closed(samples, 1.02) == []  # taken once


def test_a_rank_row_reads_back_as_the_rank_sample_written() -> None:
    r = RankSample(3.5, 2, 40, 12.5, 80.0, node=1, samples_per_s=400.0, input_wait_pct=12.0, allreduce_exposed_ms=0.3)
    r = dataclasses.replace(r, own_ms=19.25, comm_ms=2.5)
    parsed = RowParser(header()).messages(rank_row(r))
    assert parsed == [r]
    own_work_at = len(header()) - len(MEMORY_COLUMNS) - 1  # then a job's memory, and an event's data last
    assert header()[own_work_at - 2 : own_work_at] == OWN_WORK_COLUMNS == ["own_ms", "comm_ms"]
    older = header()[: own_work_at - len(OWN_WORK_COLUMNS)]  # a recording from before own work
    cells = rank_row(r)[: len(older)]
    assert RowParser(older).messages(cells) == [dataclasses.replace(r, own_ms=None, comm_ms=None)]


def _node_recording(
    path: Path,
    node: int,
    ranks: tuple[int, ...],
    zero: float,
    step_ms: dict[int, float],
    gpu_util: dict[int, float] | None = None,
    own_ms: dict[int, float] | None = None,
) -> None:
    """One node's recording of a torchrun run, as ``gpudash record`` writes it: its world event,
    rank 0's samples (on node 0) and a ``rank`` row a second for each of its ranks; with
    ``gpu_util`` (NVML index: kernel-active %), its per-GPU columns, each rank on the GPU of its
    place among the node's ranks, as the world event says; with ``own_ms``, each rank's own work
    (±1% from window to window) and the rest of its step in its collectives."""
    gpus = sorted(gpu_util or {})
    meta = run_metadata(RunConfig(workload="train.py", variant="job"), None, device="cpu", gpus_sampled=gpus)
    rec = CsvRecorder(str(path), meta)
    running = Running("train.py", "job", 32, device="cpu")
    rec.on_message(Event(0.5, EventKind.STARTED, message="python train.py on cpu", running=running))
    pairs = tuple(zip(ranks, gpus, strict=False))
    facts = WorldFacts(RUN_ID, zero, str(node), f"host{node}", tuple(ranks), 4, pairs)
    world = Event(0.6, EventKind.MEASURED, what=WORLD, before=str(node), after=RUN_ID, message=facts.message())
    rec.on_message(dataclasses.replace(world, data=facts))
    for second in range(1, 21):
        t = float(second)
        if gpu_util:
            readings = tuple(GpuReading(i, gpu_util_pct=u) for i, u in gpu_util.items())
            rec.on_message(GpuSample(t - 0.5, gpu_util_pct=gpu_util[gpus[0]], per_gpu=readings))
        figures = (second * 10, second * 320, 1.0, 10.0, 320.0, 100.0, 110.0, None)
        rec.on_message(Sample(t, "train.py", "job", 32, *figures, world_size=4))
        for rank in ranks:
            r = RankSample(t, rank, second * 10, 10.0, step_ms[rank], node, samples_per_s=80.0)
            if own_ms is not None:
                own = own_ms[rank] * (1 + 0.01 * ((second + rank) % 3 - 1))
                r = dataclasses.replace(r, own_ms=own, comm_ms=step_ms[rank] - own)
            rec.on_message(r)
    rec.close()


def test_report_joins_the_nodes_of_one_run_into_one_world_on_one_clock(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    step_ms = {0: 99.0, 1: 100.0, 2: 101.0, 3: 140.0}  # rank 3 holds the others back
    a, b = tmp_path / "node0.csv", tmp_path / "node1.csv"
    _node_recording(a, 0, (0, 1), 1_764_000_000.0, step_ms)
    _node_recording(b, 1, (2, 3), 1_764_000_002.5, step_ms)  # its gpudash started 2.5 s later
    worlds = join([load_run(a), load_run(b)])
    assert len(worlds) == 1
    w = worlds[0]
    assert w.run_id == RUN_ID and [n.offset_s for n in w.nodes] == [0.0, 2.5]
    assert [r.rank for r in w.ranks] == [0, 1, 2, 3] and [r.node for r in w.ranks] == [0, 0, 1, 1]
    assert w.span_s == pytest.approx((3.5, 20.0))  # only what every node recorded
    assert w.samples_per_s == pytest.approx(320.0)  # four ranks of 80 samples/s
    assert w.slowest is not None and (w.slowest.rank, w.slowest.node, w.slowest.host) == (3, 1, "host1")
    out = tmp_path / "report"
    assert main(["report", str(a), str(b), "--out", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["comparisons"] == []  # two nodes of one run are not an A/B
    (got,) = doc["worlds"]
    assert (got["slowest_rank"], got["slowest_node"], got["samples_per_s"]) == (3, 1, pytest.approx(320.0))
    assert (got["straggler_rank"], got["straggler"]) == (None, None)  # no own work recorded: not known
    md = (out / "report.md").read_text()
    assert f"## World: torchrun run {RUN_ID} (2 node(s), 4 ranks)" in md
    assert (  # by step time only (a recording without own work): named, and said not to be a straggler
        "slowest by step time rank 3 (node 1, host host1): 140 ms a step, 1.41× rank 0's "
        "(ranks wait for each other: this does not name a straggler)"
    ) in md
    assert "Between runs" not in md


def test_report_names_the_straggler_by_its_own_work_not_by_its_step_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 63: every rank takes the same step (the others wait for rank 3 in the collectives);
    rank 3's own work is twice theirs: the report names it, across the two nodes' recordings."""
    step_ms = {0: 100.0, 1: 100.5, 2: 100.2, 3: 100.0}  # by step time rank 1 is "slowest": chance
    a, b = tmp_path / "node0.csv", tmp_path / "node1.csv"
    own = {0: 50.0, 1: 51.0, 2: 50.0, 3: 99.0}
    _node_recording(a, 0, (0, 1), 1_764_000_000.0, step_ms, own_ms=own)
    _node_recording(b, 1, (2, 3), 1_764_000_001.0, step_ms, own_ms=own)
    (w,) = join([load_run(a), load_run(b)])
    assert w.verdict is not None and w.verdict.rank == 3 and w.slowest is not None and w.slowest.rank == 1
    assert [r.own_ms for r in w.ranks] == pytest.approx([50.0, 51.0, 50.0, 99.0], rel=0.01)
    assert w.ranks[3].comm_ms == pytest.approx(1.0, abs=0.5) and w.ranks[0].comm_ms == pytest.approx(50, rel=0.02)
    out = tmp_path / "report"
    assert main(["report", str(a), str(b), "--out", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (got,) = doc["worlds"]
    assert got["straggler_rank"] == 3 and got["slowest_rank"] == 1  # kept for the readers of 0.x
    assert got["straggler"].startswith("straggler: rank 3 — its own work 99") and "(2.0×)" in got["straggler"]
    assert [r["own_ms"] for r in got["ranks"]] == pytest.approx([50.0, 51.0, 50.0, 99.0], rel=0.01)
    md = (out / "report.md").read_text()
    assert "| own work ms | collectives ms |" in md and "| 3 | 1 | host1 | 10 | 80.0 | 100 | 99 | 1 |" in md
    assert "; straggler: rank 3 — its own work 99" in md and "; rank 3 runs on node 1, host host1." in md
    assert "slowest" not in md

    even = {0: 50.0, 1: 50.0, 2: 50.0, 3: 50.0}  # the same work on every rank
    _node_recording(a, 0, (0, 1), 1_764_000_000.0, step_ms, own_ms=even)
    _node_recording(b, 1, (2, 3), 1_764_000_001.0, step_ms, own_ms=even)
    (w,) = join([load_run(a), load_run(b)])
    assert w.verdict is not None and w.verdict.rank is None and w.straggler is None
    assert w.sentence().endswith("; no straggler (ranks' own work within 3%)")
    assert main(["report", str(a), str(b), "--json", "-q"]) == 0
    (got,) = json.loads(capsys.readouterr().out)["worlds"]
    assert (got["straggler_rank"], got["straggler"]) == (None, "no straggler (ranks' own work within 3%)")


def test_each_rank_gets_the_figures_of_its_own_gpu_on_its_own_node(tmp_path: Path) -> None:
    """Issue 55: every rank's GPU side by side, whichever node's recording watched it."""
    step_ms = {0: 100.0, 1: 100.0, 2: 100.0, 3: 100.0}
    a, b = tmp_path / "node0.csv", tmp_path / "node1.csv"
    _node_recording(a, 0, (0, 1), 1_764_000_000.0, step_ms, gpu_util={0: 91.0, 1: 88.0})
    _node_recording(b, 1, (2, 3), 1_764_000_000.0, step_ms, gpu_util={4: 97.0, 5: 42.0})  # ranks on GPUs 4 and 5
    (w,) = join([load_run(a), load_run(b)])
    assert [(r.rank, r.gpu, r.gpu_util_pct) for r in w.ranks] == [
        (0, 0, 91.0),
        (1, 1, 88.0),
        (2, 4, 97.0),
        (3, 5, 42.0),
    ]
    assert "| 3 | 1 | host1 | " in "\n".join(markdown(w)) and "| 5 | 42 |" in "\n".join(markdown(w))
    older = (
        "torchrun run r: node 1 (host host1), ranks 2, 3 of 4; time 0 at unix 1.000; GPUs by rank (NVML index) 2:4 3:5"
    )
    read = older_data({"what": WORLD, "before": "1", "after": "r", "message": older}, {})  # before event_data
    assert isinstance(read, WorldFacts) and (read.run_id, read.node) == ("r", "1")
    assert (read.clock_unix, read.host, read.rank_gpus) == (1.0, "host1", ((2, 4), (3, 5)))


def test_a_ranks_first_step_names_its_gpu_in_the_world_event() -> None:
    uuids = {"GPU-aaa": 0, "GPU-bbb": 3}
    world = JobWorld(time.monotonic(), uuids.get)
    world.hello(_hello(0, 0))
    world.hello(_hello(1, 0))
    first = world.event(1.0, 2)
    assert first is not None and "GPUs by rank" not in first.message
    world.first({"k": "first", "rank": 1, "gpu_uuid": "GPU-bbb"})
    world.first({"k": "first", "rank": 0, "gpu_uuid": "GPU-aaa"})
    again = world.event(2.0, 2)  # told again: the ranks' GPUs are known now
    assert again is not None and facts_of(again).rank_gpus == ((0, 0), (1, 3)) and world.event(3.0, 2) is None
    assert "GPUs by rank (NVML index) 0:0 1:3" in again.message


def test_recordings_of_different_runs_are_still_compared(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    step_ms = {0: 100.0, 1: 100.0}
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    _node_recording(a, 0, (0, 1), 1_764_000_000.0, step_ms)
    _node_recording(b, 0, (0, 1), 1_764_000_100.0, step_ms)
    text = b.read_text().replace(RUN_ID, "run-other")
    b.write_text(text)
    assert main(["report", str(a), str(b), "--out", str(tmp_path / "r"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["worlds"]) == 2 and doc["comparisons"]  # two worlds, and the A/B between them


@pytest.mark.slow
def test_two_nodes_of_a_torchrun_job_recorded_apart_are_joined_by_report(tmp_path: Path) -> None:
    """Two torchrun agents on this machine as two nodes (gloo on the CPU), each under its own
    ``gpudash record``: report joins them by the rendezvous id into one world of two ranks."""
    torchrun = Path(sys.executable).with_name("torchrun")
    job = JOBS / "ddp_loop.py"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    procs = []
    for node in (0, 1):
        rdzv = ["--nnodes", "2", "--node-rank", str(node), "--nproc-per-node", "1", "--rdzv-backend", "c10d"]
        rdzv += ["--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "two-nodes"]
        argv = [sys.executable, "-m", "gpudash", "record", str(tmp_path / f"node{node}.csv"), "-q", "--"]
        argv += [str(torchrun), *rdzv, str(job), "60"]
        procs.append(subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env))
    for proc in procs:
        out, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, err[-3000:]
    worlds = join([load_run(tmp_path / "node0.csv"), load_run(tmp_path / "node1.csv")])
    assert len(worlds) == 1, worlds
    w = worlds[0]
    assert w.run_id == "two-nodes" and sorted(n.node for n in w.nodes if n.node is not None) == [0, 1]
    assert [r.rank for r in w.ranks] == [0, 1] and {r.node for r in w.ranks} == {0, 1}
    assert all(abs(n.offset_s) < 60 for n in w.nodes)  # both gpudash started within a minute: one clock
    assert w.slowest is not None and w.samples_per_s is not None and w.samples_per_s > 0


def _traced_on_both_ranks(out: Path) -> bool:
    """The recording has a profiler window's event, and rank 1's trace of it is on disk."""
    if not out.exists():
        return False
    with open(out, newline="") as f:
        traced = [r for r in csv.DictReader(f) if r["event_what"] == "trace" and r["event_kind"] == "measured"]
    lead = Path(traced[0]["event_message"].rsplit("→ ", 1)[1]) if traced else None
    return lead is not None and lead.with_name(lead.name.replace("-rank0.json", "-rank1.json")).is_file()


@pytest.mark.slow
def test_a_profiler_window_of_a_torchrun_job_is_taken_on_every_rank(tmp_path: Path) -> None:
    """The same steps profiled on each rank: the lead's window is the run's trace event, and the
    other rank's trace is written beside it (its exposed all-reduce goes on its rank rows). A window
    a second; Ctrl-C once one is on disk for both ranks (a wait on files, not on a duration)."""
    torchrun = Path(sys.executable).with_name("torchrun")
    job = [str(torchrun), "--standalone", "--nproc-per-node", "2", str(JOBS / "ddp_loop.py"), "100000000"]
    out = tmp_path / "r.csv"
    argv = [sys.executable, "-m", "gpudash", "record", str(out), "-q", "--duration", "600", "--trace-every", "1"]
    proc = subprocess.Popen(
        [*argv, "--trace-steps", "3", "--", *job],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    err = act_when(proc, lambda: _traced_on_both_ranks(out), lambda: proc.send_signal(signal.SIGINT), wait_s=240)
    with open(out, newline="") as f:
        rows = list(csv.DictReader(f))
    status = json.loads(out.with_suffix(".json").read_text())["status"]
    assert status == "interrupted by SIGINT" and rows[-1]["event_kind"] == "stopped", err[-3000:]  # a whole CSV
    traced = [r for r in rows if r["event_what"] == "trace" and r["event_kind"] == "measured"]
    assert traced, err[-3000:]
    lead = Path(traced[0]["event_message"].rsplit("→ ", 1)[1])
    assert lead.name.endswith("-rank0.json") and lead.is_file()
    assert lead.with_name(lead.name.replace("-rank0.json", "-rank1.json")).is_file()  # the same window, rank 1


def test_replay_joins_the_other_nodes_ranks_on_the_first_recordings_clock(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from gpudash.recording.replay import ReplaySource, read_all
    from gpudash.recording.replay_world import joined_ranks

    step_ms = {0: 99.0, 1: 100.0, 2: 101.0, 3: 140.0}
    a, b, other = tmp_path / "node0.csv", tmp_path / "node1.csv", tmp_path / "other.csv"
    _node_recording(a, 0, (0, 1), 1_764_000_000.0, step_ms)
    _node_recording(b, 1, (2, 3), 1_764_000_002.5, step_ms)  # its clock's zero 2.5 s after node 0's
    messages = read_all(ReplaySource(a, joined=joined_ranks(str(a), [str(b)])))
    ranks = [m for m in messages if isinstance(m, RankSample)]
    assert {r.rank for r in ranks} == {0, 1, 2, 3}
    node1 = [r for r in ranks if r.rank == 3]
    assert node1[0].time_s == pytest.approx(3.5) and node1[-1].time_s == pytest.approx(22.5)  # on node 0's clock
    _node_recording(other, 0, (0, 1), 1_764_000_000.0, step_ms)
    other.write_text(other.read_text().replace(RUN_ID, "run-other"))
    assert main(["replay", str(a), str(other)]) == 2  # one line, before any dashboard
    assert "is of run run-other, not run-7f3a" in capsys.readouterr().err


def test_a_ranks_rate_in_the_world_table_is_its_rate_while_it_stepped() -> None:
    """A CPU torchrun job: a burst of short warm-up windows closed together as the run began, its
    steady windows, then empty windows of its teardown. The world table's steps/s is its steps over
    the time of its windows with steps (the configuration's figure read 234, a mean of the windows
    174: `report` showed both for one run)."""
    from gpudash.report.world import stepping_rates

    rows, steps, t = [], 0, 0.0
    for rate, new, windows in ((50.0, 2, 4), (200.0, 50, 8), (0.0, 0, 4)):
        for _ in range(windows):
            steps, t = steps + new, t + 0.25
            rows.append(RankSample(t, 0, steps, rate, None, samples_per_s=32 * rate))
    per_s, samples = stepping_rates(rows)
    assert per_s == pytest.approx(408 / (4 * 2 / 50 + 8 * 50 / 200))
    assert samples == pytest.approx(32 * per_s)
