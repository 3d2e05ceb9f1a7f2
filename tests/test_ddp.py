"""Data-parallel ranks on the CPU (gloo): DDP trains what one process trains on the global batch,
every rank holds the same parameters, controls reach every rank at the same step, a change one rank
refuses is refused by all, and the scaling efficiency is measured (the launcher and the command
line: tests/test_ddp_launch.py)."""

from __future__ import annotations

import multiprocessing
import os
import socket
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.helpers import once_per_session
from workloads.base import Workload, WorkloadOptions
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


@dataclass(frozen=True)
class Job:
    """One data-parallel run of the ranks: a batch change at step 2 (``_change_run``), or with
    ``scaling`` the scaling efficiency measured mid-run (``_scaling_run``)."""

    family: str = "sync_loss"
    variant: str = "fixed"
    knobs: str = "none"
    scaling: bool = False


def _rank(rank: int, world: int, port: int, jobs: dict[str, Job], out: multiprocessing.Queue, device: str) -> None:
    """One rank: a process group, then each job in turn (each with its own workload and DDP), its
    result put on ``out`` as (job name, rank, result); a job that raises puts its traceback."""
    os.environ.update(
        MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank)
    )
    import torch.distributed as dist

    torch.set_num_threads(1)
    on_cuda = device == "cuda"
    if on_cuda:
        torch.cuda.set_device(rank)
    dist.init_process_group("nccl" if on_cuda else "gloo")
    group = dist.new_group(backend="gloo") if on_cuda else dist.group.WORLD
    for name, job in jobs.items():
        try:
            result = _scaling_run(rank, group, dist) if job.scaling else _change_run(rank, job, group, dist, device)
        except BaseException:
            out.put((name, rank, traceback.format_exc()))
            raise
        out.put((name, rank, result))
    dist.destroy_process_group()


def _change_run(rank: int, job: Job, group: object, dist: Any, device: str) -> tuple:
    """The workload with DDP, STEPS steps (a batch change at step 2 through the lockstep controls),
    then its parameters, where the change applied, its batch size and its loader workers."""
    from gpudash.core.protocol import SetBatchSize
    from gpudash.engine.loop import StepLoop
    from gpudash.engine.ranks import LockstepControls
    from workloads.knobs import parse_knobs

    pending = [SetBatchSize(BATCH * 2)] if rank == 0 else []
    opts = WorkloadOptions(
        variant=job.variant,
        batch_size=BATCH,
        image_size=_size(job.family),
        seed=SEED,
        knobs=parse_knobs(job.knobs),
        distributed=RankInfo.from_env(),
    )
    with build(job.family, f"cuda:{rank}" if device == "cuda" else "cpu", opts) as w:
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
        return flat.numpy(), changed_at, w.batch_size, _loader_workers(w)  # numpy: pickled by value


LoaderWorkers = tuple[list[int] | None, list[str]]  # (their exit codes, the modules that started them)
Loaders = dict[int, LoaderWorkers]  # each rank's loader workers


def _loader_workers(w: Workload) -> LoaderWorkers:
    """The exit codes of the first configuration's loader workers, and the ``multiprocessing.popen_*``
    modules that started the running ones (none when the workload has no loader)."""
    running = getattr(getattr(w, "batches", None), "_workers", ())
    return getattr(w, "retired_worker_exit_codes", None), sorted({type(p._popen).__module__ for p in running})


RankResult = tuple[torch.Tensor, list[int], int]  # (parameters, steps where the change applied, batch size)


def _ddp_runs(jobs: dict[str, Job], device: str = "cpu") -> dict[str, dict[int, tuple]]:
    """Two ranks (gloo on the CPU; ``device="cuda"``: NCCL, one GPU each) that run ``jobs`` one after
    the other in one process group, imports and group paid once: each job's result, by rank."""
    world = 2
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    port = _free_port()
    procs = [ctx.Process(target=_rank, args=(r, world, port, jobs, out, device)) for r in range(world)]
    for p in procs:
        p.start()
    got: dict[str, dict[int, tuple]] = {name: {} for name in jobs}
    try:
        for _ in range(world * len(jobs)):
            name, rank, result = out.get(timeout=180)
            assert not isinstance(result, str), f"rank {rank} failed in {name}: {result}"
            got[name][rank] = result
        for p in procs:
            p.join(30)
            assert p.exitcode == 0
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
    return got


def ddp_run(
    family: str, variant: str, knobs: str = "none", loaders: Loaders | None = None, device: str = "cpu"
) -> dict[int, RankResult]:
    """Two ranks, one job of ``_ddp_runs``: each one's (parameters, steps where the change applied,
    batch size); ``loaders``, when given, gets each rank's ``LoaderWorkers``."""
    return _results(_ddp_runs({"run": Job(family, variant, knobs)}, device)["run"], loaders)


def _results(by_rank: dict[int, tuple], loaders: Loaders | None = None) -> dict[int, RankResult]:
    """A change job's results as ``RankResult`` by rank; its loader workers into ``loaders``."""
    got: dict[int, RankResult] = {}
    for rank, (flat, changed_at, batch, rank_loaders) in by_rank.items():
        got[rank] = (torch.from_numpy(flat), changed_at, batch)
        if loaders is not None:
            loaders[rank] = rank_loaders
    return got


def single_run_on_the_global_batch(family: str, variant: str, world: int = 2, device: str = "cpu") -> torch.Tensor:
    """One process, no DDP: each step's batch is the ranks' batches of that step, concatenated;
    the batch doubles at step 2 as in the ranks' run."""

    def pool_of(rank: int, batch: int) -> list[tuple[torch.Tensor, ...]]:
        with build(
            family,
            "cpu",
            WorkloadOptions(variant=variant, batch_size=batch, image_size=_size(family), seed=data_seed(SEED, rank)),
        ) as w:
            assert w.pool is not None, f"{family} draws its batches from a pool"
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
            assert w.pool is not None
            w.pool.batches = [batch]
            w.pool.rewind()
            w.step()
        return torch.cat([p.detach().double().flatten().cpu() for p in w.trained_parameters()])


MINE = f"{ROOT / 'examples' / 'mine.py'}:workload"  # your own: DDP wraps Training.model
NO_SYNC = "ddp_no_sync=2,ddp_torch_defaults,ddp_bucket_mb=1"
# every live run of this file, one after the other in one pair of ranks (torch imported twice, not 16 times)
JOBS = {
    "encdec": Job("encdec", "serial"),
    "sync_loss": Job("sync_loss", "fixed"),
    MINE: Job(MINE, "serial"),
    "input_pipeline": Job("input_pipeline", "workers"),
    "augment": Job("augment", "cpu"),
    "no_sync": Job("sync_loss", "fixed", NO_SYNC),
    "scaling": Job(scaling=True),
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[int, tuple]]:
    """Each of ``JOBS``' results by rank."""
    return once_per_session(tmp_path_factory, "test_ddp-runs", lambda: _ddp_runs(JOBS))


@pytest.mark.parametrize(
    ("family", "variant", "rel"),
    [
        ("encdec", "serial", 1e-6),
        # each rank's loss is a mean over its own non-ignored pixels; DDP averages the two means, one
        # process takes the mean over all of them: the same up to the ranks' different counts
        ("sync_loss", "fixed", 1e-4),
        (MINE, "serial", 1e-6),
    ],
)
@pytest.mark.slow
def test_two_ranks_train_what_one_process_trains_on_the_global_batch(
    runs: dict[str, dict[int, tuple]], family: str, variant: str, rel: float
) -> None:
    got = _results(runs[family])
    (p0, changed0, batch0), (p1, changed1, batch1) = got[0], got[1]
    assert torch.equal(p0, p1)  # every rank holds the same parameters
    assert changed0 == changed1 == [2] and batch0 == batch1 == BATCH * 2  # the change: same step, every rank
    single = single_run_on_the_global_batch(family, variant)
    assert (p0 - single).norm() / single.norm() < rel


@pytest.mark.slow
@pytest.mark.parametrize("family", ["input_pipeline", "augment"])
def test_loader_workers_of_two_ranks_survive_a_batch_change(runs: dict[str, dict[int, tuple]], family: str) -> None:
    """The DataLoader families under DDP (input_pipeline's workers, augment's cpu): the change at
    step 2 shuts each rank's workers down (they exit cleanly) and starts new ones from the rank's
    forkserver, and both ranks train on in step."""
    loaders: Loaders = {}
    got = _results(runs[family], loaders)
    (p0, changed0, batch0), (p1, changed1, batch1) = got[0], got[1]
    assert torch.equal(p0, p1)
    assert changed0 == changed1 == [2] and batch0 == batch1 == BATCH * 2
    for exit_codes, started_by in loaders.values():
        assert exit_codes and not any(exit_codes) and started_by == ["multiprocessing.popen_forkserver"]


@pytest.mark.slow
def test_no_sync_accumulation_steps_the_optimizer_every_kth_step_on_every_rank(
    runs: dict[str, dict[int, tuple]],
) -> None:
    got, plain = _results(runs["no_sync"]), _results(runs["sync_loss"])
    assert torch.equal(got[0][0], got[1][0])
    assert not torch.equal(got[0][0], plain[0][0])  # accumulation trains differently


def test_ddp_is_set_up_with_gpudash_settings_unless_a_knob_asks_for_torch_defaults() -> None:
    from workloads.distributed import GPUDASH_BUCKET_MB, DdpSettings

    assert DdpSettings.chosen(bucket_mb=None, torch_defaults=False) == DdpSettings(GPUDASH_BUCKET_MB, True)
    assert DdpSettings.chosen(bucket_mb=None, torch_defaults=True) == DdpSettings(None, False)
    assert DdpSettings.chosen(bucket_mb=5.0, torch_defaults=True) == DdpSettings(5.0, False)
    assert DdpSettings.chosen(bucket_mb=1.0, torch_defaults=False) == DdpSettings(1.0, True)
    assert not DdpSettings().static_graph  # NCCL ranks came apart with it (workloads/distributed.py)


def _scaling_run(rank: int, group: object, dist: Any) -> tuple[list[dict[str, str]], Any]:
    """One rank of a run that measures its scaling efficiency after a few samples: the measured
    events' details and the parameters."""
    from gpudash.core.protocol import Event, MeasureScaling, Stop
    from gpudash.engine.loop import StepLoop
    from gpudash.engine.ranks import LockstepControls

    pending = [Stop(), MeasureScaling(10)]
    events: list[object] = []

    def local(_timeout: float) -> object:
        if len(pending) == 2:  # once a steady rate is known to measure against (samples, not steps)
            due = loop.config_rate[1] >= 0.3
        else:  # once it answered (or a cap of steps)
            due = any(isinstance(e, Event) and e.what == "scaling" for e in events) or loop.steps_issued >= 20000
        return pending.pop() if pending and due else None

    opts = WorkloadOptions(variant="fixed", batch_size=2, image_size=16, seed=SEED, distributed=RankInfo.from_env())
    with build("sync_loss", "cpu", opts) as w:
        loop = StepLoop(
            w,
            emit=events.append,
            controls=LockstepControls(local if rank == 0 else None, group, dist),
            sample_interval_s=0.1,
            lockstep_every=5,
        )
        loop.run(duration_s=120)
        flat = torch.cat([p.detach().double().flatten() for p in w.trained_parameters()]).numpy()
    return [e.details for e in events if isinstance(e, Event) and e.what == "scaling"], flat


@pytest.mark.slow
def test_scaling_efficiency_is_measured_against_rank_0_alone_and_leaves_the_ranks_in_step(
    runs: dict[str, dict[int, tuple]],
) -> None:
    (measured, flat0), (_, flat1) = runs["scaling"][0], runs["scaling"][1]
    (details,) = [d for d in measured if "scaling_efficiency" in d]
    assert 0.0 < float(details["scaling_efficiency"]) < 2.0
    assert float(details["single_rank_steps_per_s"]) > 0 and details["world_size"] == "2"
    assert (flat0 == flat1).all()  # rank 0's solo steps were put back: the ranks still agree


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


def test_slow_steps_shorten_the_steps_between_control_looks(monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace

    from gpudash.engine import ranks
    from gpudash.engine.ranks import LOCKSTEP_EVERY, LockstepControls

    clock = [100.0]  # the looks' clock, moved by the test: a busy machine cannot stretch the 0.4 s
    monkeypatch.setattr(ranks, "time", SimpleNamespace(monotonic=lambda: clock[0]))

    class OneRank:  # a broadcast among one rank: the box stays as rank 0 filled it
        @staticmethod
        def broadcast_object_list(box: list, src: int, group: object) -> None:
            pass

    class Loop:
        steps_issued, lockstep_every = 0, LOCKSTEP_EVERY

    loop = Loop()
    controls = LockstepControls(lambda _t: None, None, OneRank).attach(loop)
    controls(0.0)  # the first look: no rate yet
    clock[0] += 0.4
    loop.steps_issued = 2  # 5 steps/s: half a second holds 2 or 3 of them
    controls(0.0)
    assert loop.lockstep_every in (2, 3)
    clock[0] += 0.4
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
    # stand-ins that hold only what the share reads: building a workload per layout would start ranks
    assert share(types.SimpleNamespace(rank_info=None)) == 8  # type: ignore[arg-type]
    assert share(types.SimpleNamespace(rank_info=RankInfo(3, 4, 1, local_world_size=2))) == 4  # type: ignore[arg-type]
    assert share(types.SimpleNamespace(rank_info=RankInfo(0, 16, 0, local_world_size=16))) == 1  # type: ignore[arg-type]
