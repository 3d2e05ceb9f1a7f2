"""Issue 74's memory probe (session 20): a data-parallel job's speed and its allocator's peaks, run
bare and under ``gpudash record`` — do the hooks that time its collectives (an event at each call
and at each end; an asynchronous call's end recorded in its future's callback) cost it memory or
time? FSDP2 (``fully_shard`` on each of 8 linear layers of 4096, batch 64 a rank) or DDP (the same
model), fp32, SGD.

torchrun --nproc-per-node 2 memory_probe.py --model fsdp|ddp [--steps 300] [--python-hook]
(``--python-hook``: DDP's reference Python hook, ``default_hooks.allreduce_hook``, which gpudash
gives a DDP model, without gpudash — what the hook costs by itself.)
Prints one JSON line a rank after the steps: steps/s over the last steps, max_memory_reserved and
max_memory_allocated in bytes.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import torch
import torch.distributed as dist


def model_of(kind: str, device: torch.device, python_hook: bool = False) -> torch.nn.Module:
    """8 linear layers of 4096 with ReLUs, sharded per layer (FSDP2) or wrapped in DDP."""
    layers = [torch.nn.Sequential(torch.nn.Linear(4096, 4096), torch.nn.ReLU()) for _ in range(8)]
    model = torch.nn.Sequential(*layers).to(device)
    if kind == "ddp":
        ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[device.index])
        if python_hook:
            from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

            ddp.register_comm_hook(None, default_hooks.allreduce_hook)
        return ddp
    from torch.distributed.fsdp import fully_shard

    for layer in layers:
        fully_shard(layer)
    fully_shard(model)
    return model


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--model", choices=("fsdp", "ddp"), default="fsdp")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--python-hook", action="store_true")
    args = p.parse_args()
    dist.init_process_group("nccl")
    rank = dist.get_rank()
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    torch.cuda.set_device(device)
    model = model_of(args.model, device, args.python_hook)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(64, 4096, device=device)
    warm = args.steps // 5
    for i in range(args.steps):
        if i == warm:
            torch.cuda.synchronize()
            start = time.perf_counter()
        loss = model(x).square().mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    torch.cuda.synchronize()
    rate = (args.steps - warm) / (time.perf_counter() - start)
    row = {
        "rank": rank,
        "model": args.model,
        "steps_per_s": round(rate, 2),
        "max_reserved": torch.cuda.max_memory_reserved(device),
        "max_allocated": torch.cuda.max_memory_allocated(device),
        "gpudash": "GPUDASH_JOB_CHANNEL" in os.environ,
        "python_hook": args.python_hook,
        "torch": torch.__version__,
    }
    print("JOB " + json.dumps(row), flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
