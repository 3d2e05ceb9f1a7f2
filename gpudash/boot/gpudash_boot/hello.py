"""What a process of the job says of itself to gpudash (``hooks.py`` sends it): its hello once torch
is imported (its rank, node, host, process group, torch, the socket that takes gpudash's requests),
a DataLoader worker's hello, and its first step's facts (the device and its GPU, the optimizer, how
its steps are counted, the settings it runs with). Standard library and the job's own torch only."""

from __future__ import annotations

import os
import socket
import sys
from typing import Any

from . import wire


def hello(torch: Any, rank: int, own: str) -> dict[str, Any]:
    """A process that imported torch (``own``: its socket, for gpudash's requests)."""
    env = os.environ
    return {
        "k": wire.HELLO,
        "pid": os.getpid(),
        "rank": rank,
        "world": int(env.get("WORLD_SIZE", "1") or 1),
        "node": env.get("GROUP_RANK"),  # torchrun's: the node (agent) the rank runs on
        "run_id": env.get("TORCHELASTIC_RUN_ID"),  # the rendezvous id every node's ranks share
        "host": socket.gethostname(),
        "pgid": os.getpgid(0),
        "torch": torch.__version__,
        "argv": sys.argv[:6],
        "ctl": own,
    }


def worker_hello(own: str) -> dict[str, Any]:
    """A DataLoader worker (or a spawned process before it steps): known for its stacks."""
    return {"k": wire.WORKER, "pid": os.getpid(), "ppid": os.getppid(), "ctl": own}


def first_step(torch: Any, rank: int, world: int, device: str, mono: float, **said: Any) -> dict[str, Any]:
    """A rank's first step on ``device``, at ``mono`` (this process's clock then: gpudash places its
    times on its own), with what else is ``said`` (``optimizer``, ``counted``, ``settings``) and, on
    a GPU, which one."""
    first: dict[str, Any] = {"k": wire.FIRST, "rank": rank, "pid": os.getpid(), "device": device, "mono": mono}
    first.update(said, world=world, torch=torch.__version__)
    if device.startswith("cuda"):
        index = torch.device(device).index
        props = torch.cuda.get_device_properties(torch.cuda.current_device() if index is None else index)
        first.update(gpu_name=props.name, gpu_uuid=str(getattr(props, "uuid", "") or ""), cuda=str(torch.version.cuda))
    return first


def device_of(optimizer: Any) -> str:
    """The device of the optimizer's (or the leaves') first parameter; the leaves' own, where none."""
    for group in optimizer.param_groups:
        for p in group["params"]:
            return str(p.device)
        break
    return str(getattr(optimizer, "device", "cpu"))
