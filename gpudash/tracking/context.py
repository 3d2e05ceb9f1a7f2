"""Where and how ``gpudash.track()`` records: the device it times on, the rank, the file.

Torch is never imported here unless the device asked for is CUDA: with ``device=None`` the
tracker times on CUDA only when the user's script has imported torch already and CUDA is
available. Every check raises ``ValueError`` or ``OSError`` with a one-line message.
"""

from __future__ import annotations

import os
import platform
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpudash.core.start_note import StartNote

_DEVICE = re.compile(r"cpu|cuda(:(0|[1-9]\d*))?")


@dataclass(frozen=True)
class Rank:
    """This process's place in a data-parallel job (0 of 1: no job)."""

    rank: int = 0
    world_size: int = 1


def rank_of_job() -> Rank:
    """The rank from an initialised ``torch.distributed`` process group, else from the
    ``RANK`` and ``WORLD_SIZE`` variables torchrun sets; 0 of 1 when neither says."""
    torch = sys.modules.get("torch")
    dist = getattr(torch, "distributed", None) if torch is not None else None
    if dist is not None and dist.is_available() and dist.is_initialized():
        return Rank(int(dist.get_rank()), int(dist.get_world_size()))
    rank, world = os.environ.get("RANK", ""), os.environ.get("WORLD_SIZE", "")
    if rank.isdecimal() and world.isdecimal() and int(rank) < int(world):
        return Rank(int(rank), int(world))
    return Rank()


def rank_path(path: Path, rank: int) -> Path:
    """``run.csv`` → ``run.rank1.csv`` (a name without a suffix: ``run`` → ``run.rank1``)."""
    return path.with_name(f"{path.stem}.rank{rank}{path.suffix}")


def check_path(path: str | os.PathLike[str]) -> Path:
    """The CSV's path, if it can be created there: its directory exists and it is not a directory."""
    if not isinstance(path, (str, os.PathLike)) or str(path) in ("", "-"):
        raise ValueError(f"gpudash.track: path must name a CSV file, got {path!r}")
    p = Path(path).expanduser()
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise FileNotFoundError(f"gpudash.track: cannot create {p}: no directory {parent}")
    if p.is_dir():
        raise IsADirectoryError(f"gpudash.track: {p} is a directory, not a CSV file")
    return p


@dataclass(frozen=True)
class Device:
    """The device the steps are timed on: ``"cpu"`` (wall clock) or ``"cuda:N"`` (CUDA events)."""

    name: str
    torch: Any = None  # the torch module, when CUDA
    index: int | None = None  # the CUDA device index

    @property
    def cuda(self) -> bool:
        return self.index is not None


def resolve_device(device: str | None) -> Device:
    """``None``: CUDA's current device when torch is imported and CUDA is available, else the
    CPU; ``"cuda"`` (the current device), ``"cuda:N"`` or ``"cpu"``: as asked."""
    if device is not None and (not isinstance(device, str) or not _DEVICE.fullmatch(device)):
        raise ValueError(f"gpudash.track: device must be 'cpu', 'cuda' or 'cuda:N', got {device!r}")
    if device == "cpu":
        return Device("cpu")
    torch: Any
    if device is None:
        torch = sys.modules.get("torch")
        if torch is None or not torch.cuda.is_available():
            return Device("cpu")
    else:
        import torch

        if not torch.cuda.is_available():
            raise ValueError(f"gpudash.track: device {device}: CUDA is not available on this machine")
    index = int(device.split(":")[1]) if device and ":" in device else int(torch.cuda.current_device())
    if index >= torch.cuda.device_count():
        raise ValueError(f"gpudash.track: device {device}: this machine has {torch.cuda.device_count()} CUDA devices")
    return Device(f"cuda:{index}", torch, index)


def start_of(device: Device) -> StartNote:
    """What the "started" event says of the device, the process and the versions."""
    torch = device.torch or sys.modules.get("torch")
    version, cuda = (str(torch.__version__), str(torch.version.cuda or "")) if torch is not None else ("", "")
    if device.cuda:
        props = device.torch.cuda.get_device_properties(device.index)
        name, uuid = str(props.name), str(getattr(props, "uuid", ""))
        return StartNote(torch=version, cuda=cuda, pid=os.getpid(), device_name=name, gpu_uuid=uuid)
    cpu = platform.processor() or platform.machine() or "cpu"
    return StartNote(torch=version, cuda=cuda, pid=os.getpid(), device_name=cpu)
