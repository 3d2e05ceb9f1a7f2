"""A rank's wait in NCCL collectives, timed by the job's hooks on 2 GPUs without NCCL's own timing
(``TORCH_NCCL_ENABLE_TIMING``, which cost a DDP step 5%): rank 1 arrives 40 ms after rank 0 at each
collective, so rank 0's collective is outstanding about 40 ms from its arrival and rank 1's only for
the transfer — for a call that waits, an asynchronous one, FSDP's kind of all-gather and a DDP
model's step (its buffers' broadcast at the forward, its gradient buckets through DDP's reference
hook, which gpudash gives it). The collectives' results are the job's: the hooks never make a call
asynchronous."""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

import pytest
import torch

from gpudash.boot.gpudash_boot import comm

pytestmark = [pytest.mark.multigpu, pytest.mark.slow]
LATE_S = 0.040  # rank 1's lateness at each collective


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _each_rank(rank: int, port: int, out: str) -> None:
    import contextlib

    import torch.distributed as dist

    os.environ.pop("TORCH_NCCL_ENABLE_TIMING", None)
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    comms = comm.CommTimes(torch, contextlib.nullcontext)
    comms.every_s = 0.0  # every step's collectives timed (a job's are at most every 0.1 s)
    comms.install()
    got: dict[str, object] = {}

    def late() -> None:
        torch.cuda.synchronize()
        dist.barrier()
        torch.cuda.synchronize()
        comms.at_step()  # the barrier's and anything before: not this collective's
        if rank == 1:
            time.sleep(LATE_S)

    def waited(name: str) -> None:
        torch.cuda.synchronize()
        got[name] = comms.at_step()

    x = torch.full((1 << 20,), float(rank + 1), device="cuda")
    late()
    result = dist.all_reduce(x)
    waited("all_reduce")
    got["all_reduce_returned"] = repr(result)
    got["all_reduce_sum"] = float(x[0])

    late()
    work = dist.all_reduce(x, async_op=True)
    assert work is not None
    work.wait()
    waited("all_reduce_async")

    shard = torch.full((1 << 20,), float(rank), device="cuda")
    whole = torch.empty(2 << 20, device="cuda")
    late()
    gathering = dist.all_gather_into_tensor(whole, shard, async_op=True)
    assert gathering is not None
    gathering.wait()
    waited("all_gather_async")
    got["all_gather_halves"] = [float(whole[0]), float(whole[-1])]

    layers = torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.BatchNorm1d(1024)).cuda()  # buffers: broadcast
    model = torch.nn.parallel.DistributedDataParallel(layers, device_ids=[rank])
    batch = torch.randn(64, 1024, device="cuda")
    model(batch).sum().backward()  # the first step: DDP's hook set, its buckets built
    waited("ddp_first")
    late()
    model(batch).sum().backward()
    waited("ddp")
    got["untimed"] = comms.untimed
    comms.uninstall()
    dist.destroy_process_group()
    Path(out, f"rank{rank}.json").write_text(json.dumps(got))


def test_each_ranks_wait_in_nccl_collectives_is_timed_without_nccls_own_timing(tmp_path: Path) -> None:
    import torch.multiprocessing as mp

    mp.spawn(_each_rank, args=(free_port(), str(tmp_path)), nprocs=2, join=True)
    first, second = (json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1))
    assert first["untimed"] == "" and second["untimed"] == ""
    assert first["all_reduce_returned"] == "None" and first["all_reduce_sum"] == 3.0  # waited, as the job asked
    assert first["all_gather_halves"] == [0.0, 1.0]
    for name in ("all_reduce", "all_reduce_async", "all_gather_async", "ddp"):
        assert 30.0 < first[name] < 200.0, (name, first[name])  # rank 0 waited for rank 1's 40 ms
        assert 0.0 < second[name] < 10.0, (name, second[name])  # rank 1: the transfer alone
