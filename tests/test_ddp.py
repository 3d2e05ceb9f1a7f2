"""Data-parallel runs on the CPU (gloo): DDP trains what one process trains on the global batch,
every rank holds the same parameters, controls reach every rank at the same step, a killed rank
ends the run with a clear message and no process left, and bad layouts are refused."""

from __future__ import annotations

import csv
import multiprocessing
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from gpudash.core.procgroup import parent_of
from tests.helpers import record_args
from workloads.base import WorkloadOptions
from workloads.distributed import RankInfo, data_seed
from workloads.factory import build

ROOT = Path(__file__).resolve().parent.parent


def _size(family: str) -> int | None:
    """The image size for a reference family; a workload of your own makes its own batches."""
    return None if ":" in family else SIZE


STEPS = 4
BATCH = 2
SIZE = 32
SEED = 3


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank(
    rank: int,
    world: int,
    port: int,
    family: str,
    variant: str,
    knobs: str,
    out: multiprocessing.Queue,
    device: str = "cpu",
) -> None:
    """One rank: gloo group, the workload with DDP, STEPS steps (a batch change at step 2 through
    the lockstep controls), then its parameters and where the change applied."""
    os.environ.update(
        MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank)
    )
    import torch.distributed as dist

    from gpudash.core.protocol import SetBatchSize
    from gpudash.engine.loop import StepLoop
    from gpudash.engine.ranks import LockstepControls
    from workloads.knobs import parse_knobs

    torch.set_num_threads(1)
    on_cuda = device == "cuda"
    if on_cuda:
        torch.cuda.set_device(rank)
    dist.init_process_group("nccl" if on_cuda else "gloo")
    group = dist.new_group(backend="gloo") if on_cuda else dist.group.WORLD
    pending = [SetBatchSize(BATCH * 2)] if rank == 0 else []
    opts = WorkloadOptions(
        variant=variant,
        batch_size=BATCH,
        image_size=_size(family),
        seed=SEED,
        knobs=parse_knobs(knobs),
        distributed=RankInfo.from_env(),
    )
    with build(family, f"cuda:{rank}" if on_cuda else "cpu", opts) as w:
        changed_at: list[int] = []

        def local(_timeout: float) -> object:
            return pending.pop() if pending and loop.steps_issued >= 2 else None

        def emit(msg: object) -> None:
            if getattr(msg, "kind", None) == "changed":
                changed_at.append(loop.steps_issued)

        loop = StepLoop(
            w,
            emit=emit,
            controls=LockstepControls(local if rank == 0 else None, group, dist),
            sample_interval_s=10.0,
            lockstep_every=1,
        )
        loop.run(steps=STEPS)
        flat = torch.cat([p.detach().double().flatten().cpu() for p in w.trained_parameters()])
        loaders = (
            getattr(w, "retired_worker_exit_codes", None),  # the first configuration's workers
            sorted({type(p._popen).__module__ for p in getattr(getattr(w, "batches", None), "_workers", ())}),
        )
        out.put((rank, flat.numpy(), changed_at, w.batch_size, loaders))  # numpy: pickled by value
    dist.destroy_process_group()


Loaders = dict[int, tuple]  # a rank's loader workers: (their exit codes, the modules that started them)


def _ddp_run(family: str, variant: str, knobs: str = "none", loaders: Loaders | None = None) -> dict[int, tuple]:
    """Two CPU ranks: each one's (parameters, steps where the change applied, batch size);
    ``loaders``, when given, gets each rank's (exit codes of the first configuration's loader
    workers, the ``multiprocessing.popen_*`` modules that started the running ones)."""
    world, device = 2, "cpu"
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    port = _free_port()
    procs = [
        ctx.Process(target=_rank, args=(r, world, port, family, variant, knobs, out, device)) for r in range(world)
    ]
    for p in procs:
        p.start()
    got = {}
    for _ in range(world):
        rank, flat, changed_at, batch, rank_loaders = out.get(timeout=180)
        got[rank] = (torch.from_numpy(flat), changed_at, batch)
        if loaders is not None:
            loaders[rank] = rank_loaders
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    return got


def _single_run_on_the_global_batch(family: str, variant: str, world: int = 2, device: str = "cpu") -> torch.Tensor:
    """One process, no DDP: each step's batch is the ranks' batches of that step, concatenated;
    the batch doubles at step 2 as in the ranks' run."""

    def pool_of(rank: int, batch: int) -> list[tuple[torch.Tensor, ...]]:
        with build(
            family,
            "cpu",
            WorkloadOptions(variant=variant, batch_size=batch, image_size=_size(family), seed=data_seed(SEED, rank)),
        ) as w:
            return list(w.pool.batches)

    with build(
        family, device, WorkloadOptions(variant=variant, batch_size=BATCH * world, image_size=_size(family), seed=SEED)
    ) as w:
        for step in range(STEPS):
            if step == 2:
                w.set_batch_size(BATCH * 2 * world)
            per_rank = BATCH if step < 2 else BATCH * 2
            pools = [pool_of(r, per_rank) for r in range(world)]
            i = step if step < 2 else step - 2  # each configuration starts its pool from the top
            batch = tuple(torch.cat(parts) for parts in zip(*(p[i % len(p)] for p in pools), strict=False))
            w.pool.batches, w.pool._next = [batch], 0
            w.step()
        return torch.cat([p.detach().double().flatten().cpu() for p in w.trained_parameters()])


@pytest.mark.parametrize(
    ("family", "variant", "rel"),
    [
        ("encdec", "serial", 1e-6),
        # each rank's loss is a mean over its own non-ignored pixels; DDP averages the two means, one
        # process takes the mean over all of them: the same up to the ranks' different counts
        ("sync_loss", "fixed", 1e-4),
        (f"{ROOT / 'examples' / 'mine.py'}:workload", "serial", 1e-6),  # your own: DDP wraps Training.model
    ],
)
@pytest.mark.slow
def test_two_ranks_train_what_one_process_trains_on_the_global_batch(family: str, variant: str, rel: float) -> None:
    got = _ddp_run(family, variant)
    (p0, changed0, batch0), (p1, changed1, batch1) = got[0], got[1]
    assert torch.equal(p0, p1)  # every rank holds the same parameters
    assert changed0 == changed1 == [2] and batch0 == batch1 == BATCH * 2  # the change: same step, every rank
    single = _single_run_on_the_global_batch(family, variant)
    assert (p0 - single).norm() / single.norm() < rel


@pytest.mark.slow
@pytest.mark.parametrize(("family", "variant"), [("input_pipeline", "workers"), ("augment", "cpu")])
def test_loader_workers_of_two_ranks_survive_a_batch_change(family: str, variant: str) -> None:
    """The DataLoader families under DDP: the change at step 2 shuts each rank's workers down (they
    exit cleanly) and starts new ones from the rank's forkserver, and both ranks train on in step."""
    loaders: dict[int, tuple] = {}
    got = _ddp_run(family, variant, loaders=loaders)
    (p0, changed0, batch0), (p1, changed1, batch1) = got[0], got[1]
    assert torch.equal(p0, p1)
    assert changed0 == changed1 == [2] and batch0 == batch1 == BATCH * 2
    for exit_codes, started_by in loaders.values():
        assert exit_codes and not any(exit_codes) and started_by == ["multiprocessing.popen_forkserver"]


@pytest.mark.slow
def test_no_sync_accumulation_steps_the_optimizer_every_kth_step_on_every_rank() -> None:
    got = _ddp_run("sync_loss", "fixed", knobs="ddp_no_sync=2,ddp_grad_view,ddp_bucket_mb=1")
    assert torch.equal(got[0][0], got[1][0])
    plain = _ddp_run("sync_loss", "fixed")
    assert not torch.equal(got[0][0], plain[0][0])  # accumulation trains differently


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


def _descendants(pid: int) -> set[int]:
    """Every live process below ``pid`` (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            ppid = parent_of(int(entry))
            if ppid is not None:
                children.setdefault(ppid, []).append(int(entry))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _spawned_children(pid: int) -> list[int]:
    """The direct children of ``pid`` that multiprocessing spawned (not its resource tracker)."""
    return sorted(
        p
        for p in _descendants(pid)
        if parent_of(p) == pid and "spawn_main" in _cmdline(p) and "resource_tracker" not in _cmdline(p)
    )


def _alive(pid: int) -> bool:
    try:
        return "zombie" not in Path(f"/proc/{pid}/status").read_text().lower()
    except OSError:
        return False


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
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # until the ranks train
            time.sleep(0.5)
            if (cwd / "run.csv").exists() and "\nsample," in (cwd / "run.csv").read_text():
                break
        (agent,) = _spawned_children(proc.pid)  # the workload process: torchrun's agent
        ranks = _spawned_children(agent)
        assert len(ranks) == 2, ranks
        everyone = _descendants(proc.pid)
        os.kill(ranks[1], signal.SIGKILL)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, err, everyone


@pytest.mark.slow
def test_killing_one_rank_ends_the_run_with_a_clear_message_and_no_process_left(tmp_path: Path) -> None:
    code, err, everyone = kill_a_rank(
        ["-w", "sync_loss", "-v", "fixed", "--device", "cpu", "--image-size", "16"], tmp_path
    )
    assert code == 1 and "rank 1 killed by SIGKILL" in err, err
    time.sleep(1.0)
    assert not [p for p in everyone if _alive(p)]
    rows = list(csv.DictReader((tmp_path / "run.csv").open()))
    assert any(r["row_kind"] == "sample" for r in rows)  # nothing recorded was lost


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--nproc", "0"], "--nproc"),
        (["--nproc", "-1"], "--nproc"),
        (["--nproc", "3", "--device", "cuda"], "no CUDA GPU found"),  # this machine has none
        (["--nnodes", "2"], "needs --rdzv-endpoint"),
        (["--knob", "ddp_grad_view"], "needs --nproc 2 or more"),
        (["--nproc", "2", "--device", "cpu", "-v", "fixed", "--knob", "compile"], "not supported with --nproc > 1"),
    ],
)
def test_bad_data_parallel_layouts_are_one_line_and_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    out = _gpudash("--record", "x.csv", "-w", "sync_loss", *args, cwd=tmp_path, timeout=60)
    assert out.returncode == 2 and message in out.stderr, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_more_ranks_than_gpus_is_refused_naming_both(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpudash import argtypes

    monkeypatch.setattr(argtypes, "cuda_devices", lambda: (2, ""))
    with pytest.raises(argtypes.UsageError, match="--nproc 3 needs 3 GPUs, one per rank; this machine has 2"):
        argtypes.check_parallel(3, 1, None, "cuda")
    argtypes.check_parallel(2, 1, None, "auto")  # two GPUs, two ranks: fine
    with pytest.raises(argtypes.UsageError, match="use --device cuda, not cuda:1"):
        argtypes.check_parallel(2, 1, None, "cuda:1")


def _rank_scaling(rank: int, world: int, port: int, out: multiprocessing.Queue) -> None:
    """One rank of a run that measures its scaling efficiency after ~1 s of samples."""
    os.environ.update(
        MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank)
    )
    import torch.distributed as dist

    from gpudash.core.protocol import MeasureScaling, Stop
    from gpudash.engine.loop import StepLoop
    from gpudash.engine.ranks import LockstepControls

    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    pending = [Stop(), MeasureScaling(10)]
    events: list[object] = []

    def local(_timeout: float) -> object:
        due = loop.steps_issued >= (40 if len(pending) == 2 else 60)  # after a few samples
        return pending.pop() if pending and due else None

    opts = WorkloadOptions(variant="fixed", batch_size=2, image_size=16, seed=SEED, distributed=RankInfo.from_env())
    with build("sync_loss", "cpu", opts) as w:
        loop = StepLoop(
            w,
            emit=events.append,
            controls=LockstepControls(local if rank == 0 else None, dist.group.WORLD, dist),
            sample_interval_s=0.1,
            lockstep_every=5,
        )
        loop.run(duration_s=120)
        flat = torch.cat([p.detach().double().flatten() for p in w.trained_parameters()]).numpy()
    measured = [e.details for e in events if getattr(e, "what", "") == "scaling"]
    out.put((rank, measured, flat))
    dist.destroy_process_group()


@pytest.mark.slow
def test_scaling_efficiency_is_measured_against_rank_0_alone_and_leaves_the_ranks_in_step() -> None:
    ctx = multiprocessing.get_context("spawn")
    out, port = ctx.Queue(), _free_port()
    procs = [ctx.Process(target=_rank_scaling, args=(r, 2, port, out)) for r in range(2)]
    for p in procs:
        p.start()
    got = dict((r, (m, f)) for r, m, f in (out.get(timeout=180) for _ in procs))
    for p in procs:
        p.join(30)
    (measured, flat0), (_, flat1) = got[0], got[1]
    (details,) = [d for d in measured if "scaling_efficiency" in d]
    assert 0.0 < float(details["scaling_efficiency"]) < 2.0
    assert float(details["single_rank_steps_per_s"]) > 0 and details["world_size"] == "2"
    assert (flat0 == flat1).all()  # rank 0's solo steps were put back: the ranks still agree


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


def test_a_change_any_rank_refuses_is_refused_by_every_rank() -> None:
    from gpudash.core.protocol import Event, SetBatchSize
    from gpudash.engine.loop import StepLoop

    with build("sync_loss", "cpu", WorkloadOptions(variant="fixed", batch_size=2, image_size=16)) as w:
        got: list[object] = []
        pending = [SetBatchSize(4)]
        loop = StepLoop(
            w,
            emit=got.append,
            controls=lambda _t: pending.pop() if pending else None,
            agree=lambda mine: mine or "rank 1: batch 4 needs about 9 GiB; 1 GiB free",
        )
        loop.run(steps=3)
        assert w.batch_size == 2  # rank 0 could, rank 1 could not: nobody changed
    (error,) = [m for m in got if isinstance(m, Event) and m.kind == "error"]
    assert "rank 1: batch 4 needs about 9 GiB" in error.message


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


def test_slow_steps_shorten_the_steps_between_control_looks() -> None:
    from gpudash.engine.ranks import LOCKSTEP_EVERY, LockstepControls

    class OneRank:  # a broadcast among one rank: the box stays as rank 0 filled it
        @staticmethod
        def broadcast_object_list(box: list, src: int, group: object) -> None:
            pass

    class Loop:
        steps_issued, lockstep_every = 0, LOCKSTEP_EVERY

    loop = Loop()
    controls = LockstepControls(lambda _t: None, None, OneRank).attach(loop)
    controls(0.0)  # the first look: no rate yet
    time.sleep(0.4)
    loop.steps_issued = 2  # 5 steps/s: half a second holds 2 or 3 of them
    controls(0.0)
    assert loop.lockstep_every in (2, 3)
    loop.steps_issued = 10_002  # very fast steps: never more than LOCKSTEP_EVERY between looks
    controls(0.0)
    assert loop.lockstep_every == LOCKSTEP_EVERY


def test_ranks_on_one_machine_split_its_cpus_for_their_loader_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two ranks on a machine of 8 CPUs start 4 DataLoader workers each, not 8 (no oversubscription);
    ranks on other machines do not count."""
    import types

    import workloads.base as base

    monkeypatch.setattr(base, "available_cpus", lambda: 8)
    share = base.Workload.cpus_per_rank
    assert share(types.SimpleNamespace(rank_info=None)) == 8
    assert share(types.SimpleNamespace(rank_info=RankInfo(3, 4, 1, local_world_size=2))) == 4
    assert share(types.SimpleNamespace(rank_info=RankInfo(0, 16, 0, local_world_size=16))) == 1


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
        ranks = [int(p) for p in os.listdir("/proc") if p.isdigit() and parent_of(int(p)) == launcher]
        limits = {pid: _data_limit(pid) for pid in [launcher, *ranks]}
    finally:
        runner.stop()
    assert len(ranks) >= 2
    assert set(limits.values()) == {12 * 2**30 // 3}, limits


def test_parent_of_reads_a_processs_parent_from_proc() -> None:
    assert parent_of(os.getpid()) == os.getppid()
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"]) as kid:
        try:
            assert parent_of(kid.pid) == os.getpid()
        finally:
            kid.kill()
    assert parent_of(2**22 + 1) is None  # above pid_max: never a process
