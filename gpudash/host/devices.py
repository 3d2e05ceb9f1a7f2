"""Which CUDA GPUs this process may use, read without torch: ``CUDA_VISIBLE_DEVICES`` and friends.

Torch-free, NVML-free: parsing only (``gpudash.host.gpu_checks`` asks the machine).
"""

from __future__ import annotations

import os

_UUID_PREFIXES = ("gpu-", "mig-")


def _valid_entry(entry: str) -> bool:
    """A GPU index (0, 1, ...) or a GPU/MIG UUID (``GPU-8932f937...``, ``MIG-...``)."""
    return entry.isdecimal() or entry.lower().startswith(_UUID_PREFIXES)


def visible_devices(env_value: str | None) -> list[str] | None:
    """``CUDA_VISIBLE_DEVICES`` as CUDA reads it: the entries before the first invalid one
    (stripped); None when the variable is unset (every GPU visible). ``""`` hides every GPU.

    ``"0,2"`` → ``["0", "2"]``; ``"0,-1,2"`` → ``["0"]``; ``"GPU-8932f937,1"`` → both."""
    if env_value is None:
        return None
    entries: list[str] = []
    for entry in env_value.split(","):
        entry = entry.strip()
        if not _valid_entry(entry):
            break  # CUDA stops at the first invalid entry
        entries.append(entry)
    return entries


def cuda_index_hint(device: str) -> int:
    """The NVML index to sample before the child reports its GPU's UUID.

    ``cuda:N`` → N, mapped through ``CUDA_VISIBLE_DEVICES`` when its N-th entry is an index.
    """
    index = 0
    if device.startswith("cuda:"):
        try:
            index = int(device.split(":", 1)[1])
        except ValueError:
            index = 0
    entries = visible_devices(os.environ.get("CUDA_VISIBLE_DEVICES"))
    if entries and index < len(entries) and entries[index].isdecimal():
        return int(entries[index])
    return index
