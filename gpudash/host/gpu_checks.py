"""What this machine has, asked before a run starts: how many CUDA GPUs this process may use
(``/dev/nvidia*``, else NVML; ``CUDA_VISIBLE_DEVICES``) and whether ``--gpus`` names GPUs NVML
lists. Torch-free; NVML is loaded only when a function here needs it."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

from gpudash.core.protocol import GpuInfo
from gpudash.host.devices import visible_devices
from gpudash.host.gpu_selection import GpuSelectionError, requested_gpus
from gpudash.host.nvml import NvmlSampler


def cuda_devices() -> tuple[int, str]:
    """How many CUDA GPUs this process may use, without importing torch; and why if none."""
    try:
        nodes = [n for n in os.listdir("/dev") if re.fullmatch(r"nvidia\d+", n)]
    except OSError:
        nodes = []
    count, why = len(nodes), ""
    if count == 0:
        info = _nvml_gpus()
        count = len(info.names) if info.available else 0
        why = "no /dev/nvidia* device and " + (info.unavailable or "NVML lists no GPU")
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    entries = visible_devices(visible)
    if entries is not None and count:
        count = min(count, len(entries))
        if count == 0:
            why = f"CUDA_VISIBLE_DEVICES={visible!r} hides every GPU"
    return count, why


def check_gpus(requested: Sequence[int] | None) -> None:
    """Raise GpuSelectionError when ``--gpus`` names a GPU NVML does not list, or NVML lists none
    (no driver, no GPU): a GPU asked for by index that this machine lacks."""
    if requested is None:
        return
    info = _nvml_gpus()
    if not info.available:
        asked = ",".join(str(i) for i in requested)
        raise GpuSelectionError(f"--gpus {asked}: no GPU to watch here ({info.unavailable}); leave --gpus out")
    requested_gpus(requested, len(info.names))


def _nvml_gpus() -> GpuInfo:
    """The machine's GPUs as NVML lists them (or why it cannot): opened and closed, nothing watched."""
    sampler = NvmlSampler(None, gpus=())
    try:
        return sampler.open()
    finally:
        sampler.stop()
