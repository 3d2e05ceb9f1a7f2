"""Data-parallel scaling of a bare torch DDP loop — no gpudash in it — and each rank's step split: the
reference that tells what gpudash's own DDP path (``ddp_scaling``) costs, and which DDP setting pays.

For each setting it runs the same loop on 1 rank and on ``nproc`` ranks (synthetic batches made on
the device once: no input pipeline), times ``repeats`` windows of ``steps`` steps on every rank,
and takes a profiler window of ``trace_steps`` steps on each rank: per step, the compute kernels'
busy time, the all-reduce's (NCCL kernels) and its exposed part (all-reduce time when no compute
kernel runs). The efficiency is N-rank steps/s over one rank's (the slowest rank's windows), its
interval and verdict gpudash's ``compare`` over the windows. Settings: ``plain`` (DDP's defaults),
``grad_view`` (gradient_as_bucket_view), ``static`` (static_graph), ``bucket=MB``, ``bf16_hook``
(bf16 compression of the gradients), joined with ``+``. On the CPU it runs over gloo
(``device=cpu``, ``model=mlp``: a small run that checks the case)."""

from __future__ import annotations

import os
import socket
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.harness.context import Run
from benchmarks.harness.params import param
from benchmarks.harness.stats import estimates, ratio_text


@dataclass(frozen=True)
class Params:
    model: str = param("resnet50", "resnet50, or mlp (the CPU check)")
    batch: int = param(128, "the batch per rank")
    amp: str = param("bf16", "off or bf16")
    channels_last: bool = param(False, "channels_last model and inputs")
    nproc: int = param(2, "ranks of the N-rank runs")
    settings: tuple[str, ...] = param(("plain",), "DDP settings, each a run")
    steps: int = param(30, "steps a timed window")
    repeats: int = param(5, "timed windows")
    warmup: int = param(15, "steps before the windows")
    trace_steps: int = param(5, "steps of the profiler window")
    device: str = param("cuda", "cuda (NCCL) or cpu (gloo)")


def build(torch: Any, p: Params, device: Any) -> tuple[Any, Any, Any]:
    """The model, its optimizer and one synthetic batch (inputs, labels) on ``device``."""
    if p.model == "resnet50":
        import torchvision

        model = torchvision.models.resnet50(weights=None, num_classes=1000)
        x = torch.randn(p.batch, 3, 224, 224, device=device)
        y = torch.randint(0, 1000, (p.batch,), device=device)
    else:  # a small MLP: the CPU check
        model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
        x = torch.randn(p.batch, 256, device=device)
        y = torch.randint(0, 10, (p.batch,), device=device)
    model = model.to(device)
    if p.channels_last and x.dim() == 4:
        model = model.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    return model, optimizer, (x, y)


def wrap(model: Any, setting: str, device: Any) -> Any:
    """DDP over ``model`` with the setting's arguments (and comm hook)."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    parts = set(setting.split("+"))
    kwargs: dict[str, Any] = {"gradient_as_bucket_view": "grad_view" in parts, "static_graph": "static" in parts}
    for part in parts:
        if part.startswith("bucket="):
            kwargs["bucket_cap_mb"] = float(part.split("=", 1)[1])
    ddp = DDP(model, device_ids=[device.index] if device.type == "cuda" else None, **kwargs)
    if "bf16_hook" in parts:
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

        ddp.register_comm_hook(None, default_hooks.bf16_compress_hook)
    return ddp


def rank_main(rank: int, world: int, p: Params, setting: str, port: int, out: str) -> None:
    """One rank: warm up, time the windows, take the profiler window, write both to ``out``."""
    import torch
    import torch.distributed as dist

    from benchmarks.cases.shared.ddp_trace import trace_split

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    cuda = p.device == "cuda"
    device = torch.device("cuda", rank) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if cuda else "gloo", rank=rank, world_size=world)
    model, optimizer, (x, y) = build(torch, p, device)
    if world > 1:
        model = wrap(model, setting, device)
    loss_fn = torch.nn.CrossEntropyLoss()
    amp = torch.autocast(device.type, dtype=torch.bfloat16, enabled=p.amp == "bf16")

    def step() -> None:
        with amp:
            loss = loss_fn(model(x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()
        if world > 1:
            dist.barrier()

    for _ in range(p.warmup):
        step()
    sync()
    rates = []
    for _ in range(p.repeats):
        start = time.perf_counter()
        for _ in range(p.steps):
            step()
        sync()
        rates.append(p.steps / (time.perf_counter() - start))
    split = trace_split(torch, step, sync, p.trace_steps, cuda)
    dist.barrier()
    with open(os.path.join(out, f"rank{rank}.txt"), "w") as f:
        f.write(" ".join(f"{r:.6f}" for r in rates) + "\n" + " ".join(f"{v:.4f}" for v in split) + "\n")
    dist.destroy_process_group()


def ranks_of(world: int, p: Params, setting: str) -> list[tuple[list[float], list[float]]]:
    """Each rank's window rates and step split, from a run of ``world`` ranks."""
    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory() as out:
        mp.spawn(rank_main, args=(world, p, setting, port, out), nprocs=world, join=True)
        ranks = []
        for r in range(world):
            rates, split = Path(out, f"rank{r}.txt").read_text().splitlines()
            ranks.append(([float(v) for v in rates.split()], [float(v) for v in split.split()]))
    return ranks


def measure(run: Run, p: Params) -> None:
    from gpudash.stats.comparison import estimate_from_batches

    run.comment(
        f"bare DDP, {p.model} batch {p.batch} per rank, amp {p.amp}{', channels_last' if p.channels_last else ''}"
    )
    columns = ["setting", "ranks", "steps/s per rank", "step ms", "compute ms", "all-reduce ms", "exposed ms"]
    table = run.table([*columns, "efficiency", "verdict"], ["---", *["---:"] * 7, "---"])
    one = ranks_of(1, p, "plain")[0]
    base = estimate_from_batches(one[0])
    run.values("1 rank", one[0], "steps/s")
    run.row(table, "(1 rank)", 1, f"{base.mean:.2f}", f"{one[1][0]:.2f}", f"{one[1][1]:.2f}", "–", "–", 1, "–")
    for setting in p.settings:
        ranks = ranks_of(p.nproc, p, setting)
        slowest = min(ranks, key=lambda r: sum(r[0]))
        run.values(setting, slowest[0], "steps/s")
        f = run.keep(setting, estimates(setting, base, estimate_from_batches(slowest[0])))
        step_ms, compute_ms, comm_ms, exposed_ms = (max(r[1][i] for r in ranks) for i in range(4))
        rate = f"{estimate_from_batches(slowest[0]).mean:.2f}"
        cells = [f"{v:.2f}" for v in (step_ms, compute_ms, comm_ms, exposed_ms)]
        run.row(table, setting, p.nproc, rate, *cells, ratio_text(f), f.verdict)
