"""Data-parallel scaling of a bare torch DDP loop — no gpudash in it — and each rank's step split:
the reference that tells what gpudash's own DDP path (``ddp_scaling.py``) costs, and which DDP
setting pays.

    python benchmarks/ddp_bare.py [--model resnet50] [--batch 128] [--amp bf16] [--channels-last] \\
        [--nproc 2] [--setting plain --setting grad_view+static --setting bf16_hook] [--repeats 5]

For each setting it runs the same loop on 1 rank and on ``--nproc`` ranks (synthetic batches made
on the device once: no input pipeline), times ``--repeats`` windows of ``--steps`` steps (CUDA
events; wall time on the CPU) on every rank, and takes a profiler window of ``--trace-steps`` steps
on each rank: per step, the compute kernels' busy time, the all-reduce's (NCCL kernels) and its
exposed part (all-reduce time when no compute kernel runs), and the rest (the host, launches).
The efficiency is N-rank steps/s over one rank's, its interval and verdict from
``gpudash.stats.comparison.compare`` over the windows. Settings: ``plain`` (DDP's defaults),
``grad_view`` (gradient_as_bucket_view), ``static`` (static_graph), ``bucket=MB``,
``bf16_hook`` (bf16 compression of the gradients), joined with ``+``. On the CPU it runs over
gloo (``--device cpu --model mlp``: a tiny run that checks the script).
"""

from __future__ import annotations

import argparse
import datetime
import os
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpudash.engine.trace_figures import STEP_MARKER, figures, is_collective, length, read_events, union  # noqa: E402
from gpudash.stats.comparison import compare, estimate_from_batches  # noqa: E402
from gpudash.stats.fmt import fmt_ratio  # noqa: E402


def build(torch: Any, args: argparse.Namespace, device: Any) -> tuple[Any, Any, Any]:
    """The model, its optimizer and one synthetic batch (inputs, labels) on ``device``."""
    if args.model == "resnet50":
        import torchvision

        model = torchvision.models.resnet50(weights=None, num_classes=1000)
        x = torch.randn(args.batch, 3, 224, 224, device=device)
        y = torch.randint(0, 1000, (args.batch,), device=device)
    else:  # a small MLP: the CPU check
        model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
        x = torch.randn(args.batch, 256, device=device)
        y = torch.randint(0, 10, (args.batch,), device=device)
    model = model.to(device)
    if args.channels_last and x.dim() == 4:
        model = model.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    return model, optimizer, (x, y)


def wrap(torch: Any, model: Any, setting: str, device: Any) -> Any:
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


def rank_main(rank: int, world: int, args: argparse.Namespace, setting: str, port: int, out: str) -> None:
    import torch
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    cuda = args.device == "cuda"
    device = torch.device("cuda", rank) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if cuda else "gloo", rank=rank, world_size=world)
    model, optimizer, (x, y) = build(torch, args, device)
    if world > 1:
        model = wrap(torch, model, setting, device)
    loss_fn = torch.nn.CrossEntropyLoss()
    amp = torch.autocast(device.type, dtype=torch.bfloat16, enabled=args.amp == "bf16")

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

    for _ in range(args.warmup):
        step()
    sync()
    rates = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        for _ in range(args.steps):
            step()
        sync()
        rates.append(args.steps / (time.perf_counter() - start))
    split = trace_split(torch, step, sync, args.trace_steps, cuda)
    dist.barrier()
    with open(os.path.join(out, f"rank{rank}.txt"), "w") as f:
        f.write(" ".join(f"{r:.6f}" for r in rates) + "\n" + " ".join(f"{v:.4f}" for v in split) + "\n")
    dist.destroy_process_group()


def trace_split(torch: Any, step: Any, sync: Any, steps: int, cuda: bool) -> tuple[float, float, float, float]:
    """Per step, from a profiler window: (step ms, compute kernels ms, all-reduce ms, its exposed ms)."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    sync()
    start = time.perf_counter()
    with profile(activities=activities) as prof:
        for _ in range(steps):
            with torch.autograd.profiler.record_function(STEP_MARKER):  # the steps' span, as gpudash marks it
                step()
        sync()
    wall_ms = (time.perf_counter() - start) * 1e3 / steps
    if not cuda:
        return wall_ms, 0.0, 0.0, 0.0
    with tempfile.TemporaryDirectory() as scratch:
        path = os.path.join(scratch, "trace.json")
        prof.export_chrome_trace(path)
        events = read_events(path)
    fig = figures(events, steps, wall_ms * steps)  # the collectives and their exposed part, as gpudash reads them
    compute = union(_interval(e) for e in events if e.get("cat") == "kernel" and not is_collective(str(e.get("name"))))
    return wall_ms, length(compute) / 1e3 / steps, fig.comm_ms_per_step or 0.0, fig.comm_exposed_ms_per_step or 0.0


def _interval(e: dict[str, Any]) -> tuple[float, float]:
    return float(e["ts"]), float(e["ts"]) + float(e["dur"])


def run(world: int, args: argparse.Namespace, setting: str) -> list[tuple[list[float], list[float]]]:
    """Each rank's window rates and step split."""
    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory() as out:
        mp.spawn(rank_main, args=(world, args, setting, port, out), nprocs=world, join=True)
        ranks = []
        for r in range(world):
            rates, split = Path(out, f"rank{r}.txt").read_text().splitlines()
            ranks.append(([float(v) for v in rates.split()], [float(v) for v in split.split()]))
    return ranks


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", choices=("resnet50", "mlp"), default="resnet50")
    p.add_argument("--batch", type=int, default=128, help="per rank")
    p.add_argument("--amp", choices=("off", "bf16"), default="bf16")
    p.add_argument("--channels-last", action="store_true")
    p.add_argument("--nproc", type=int, default=2)
    p.add_argument("--setting", action="append", help="DDP settings, repeatable (default: plain)")
    p.add_argument("--steps", type=int, default=30, help="steps a timed window")
    p.add_argument("--repeats", type=int, default=5, help="timed windows")
    p.add_argument("--warmup", type=int, default=15)
    p.add_argument("--trace-steps", type=int, default=5)
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    args = p.parse_args()
    import torch

    print(
        f"# bare DDP, {args.model} batch {args.batch} per rank, amp {args.amp}"
        f"{', channels_last' if args.channels_last else ''} — {datetime.date.today()}, torch {torch.__version__}, "
        f"{torch.cuda.get_device_name(0) if args.device == 'cuda' else 'CPU (gloo)'}"
    )
    print("`python benchmarks/ddp_bare.py " + " ".join(sys.argv[1:]) + "`\n")
    columns = ("setting", "ranks", "steps/s per rank", "step ms", "compute ms", "all-reduce ms", "exposed ms")
    print("| " + " | ".join((*columns, "efficiency", "verdict")) + " |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    one = run(1, args, "plain")[0]
    base = estimate_from_batches(one[0])
    print(f"| (1 rank) | 1 | {base.mean:.2f} | {one[1][0]:.2f} | {one[1][1]:.2f} | – | – | 1 | – |", flush=True)
    for setting in args.setting or ["plain"]:
        ranks = run(args.nproc, args, setting)
        slowest = min(ranks, key=lambda r: sum(r[0]))
        many = estimate_from_batches(slowest[0])
        c = compare(base, many)
        step_ms, compute_ms, comm_ms, exposed_ms = (max(r[1][i] for r in ranks) for i in range(4))
        print(
            f"| {setting} | {args.nproc} | {many.mean:.2f} | {step_ms:.2f} | {compute_ms:.2f} | {comm_ms:.2f} | "
            f"{exposed_ms:.2f} | {fmt_ratio(c)} | {c.verdict} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
