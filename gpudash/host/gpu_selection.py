"""Which GPUs the NVML sampler watches: ``--gpus 0,2``, else ``CUDA_VISIBLE_DEVICES``, else all.

GPUs are named by their NVML index (as ``nvidia-smi`` numbers them), in the order given.
``CUDA_VISIBLE_DEVICES`` entries are read as CUDA reads them (``gpudash.host.devices``): an index
is taken as the NVML index (true when ``CUDA_DEVICE_ORDER=PCI_BUS_ID``, and on most machines
whose GPUs are all alike), a ``GPU-…`` UUID (or a unique prefix of one) as the GPU it names;
the list ends at the first entry that names no GPU, as CUDA's does; a ``MIG-…`` entry names a
slice of a GPU that NVML samples as a whole, so it is left out. Torch-free and NVML-free: the
sampler (``gpudash.host.nvml``) asks NVML and calls ``choose_gpus``; ``gpudash.host.gpu_checks`` checks
``--gpus`` against the machine.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from gpudash.host.devices import visible_devices


class GpuSelectionError(ValueError):
    """``--gpus`` names a GPU the machine does not have: the message is one line."""


def gpu_indexes(text: str) -> tuple[int, ...]:
    """``"0,2"`` → ``(0, 2)``: GPU indexes, each once; ValueError (one line) otherwise."""
    entries = [e.strip() for e in text.split(",")]
    if not all(e.isdecimal() for e in entries):
        raise ValueError(f"expected GPU indexes separated by commas (0,2), got {text!r}")
    indexes = tuple(int(e) for e in entries)
    repeated = sorted({i for i in indexes if indexes.count(i) > 1})
    if repeated:
        raise ValueError(f"GPU {repeated[0]} given twice in {text!r}")
    return indexes


def gpu_list(text: str) -> str:
    """The ``--gpus`` argument type: checked by ``gpu_indexes``, kept as text (``"2,0"``) so the
    option can be written back as given (``gpudash serve`` passes it on)."""
    try:
        return ",".join(str(i) for i in gpu_indexes(text))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _machine(count: int) -> str:
    return (
        "this machine has no GPU"
        if count == 0
        else ("this machine has GPU 0" if count == 1 else f"this machine has GPUs 0–{count - 1}")
    )


def requested_gpus(requested: Sequence[int], count: int) -> tuple[int, ...]:
    """``requested`` (``--gpus``) when the machine has each of them; else GpuSelectionError."""
    unknown = [i for i in requested if not 0 <= i < count]
    if unknown:
        listed = ",".join(str(i) for i in requested)
        raise GpuSelectionError(f"--gpus {listed}: no GPU {unknown[0]} ({_machine(count)}; see nvidia-smi -L)")
    return tuple(requested)


def _by_uuid(entry: str, uuids: Sequence[str]) -> int | None:
    """The GPU a ``GPU-…`` entry (or a unique prefix of its UUID) names; None when none or several."""
    want = entry.lower().removeprefix("gpu-")
    found = [i for i, u in enumerate(uuids) if u.lower().removeprefix("gpu-").startswith(want)]
    return found[0] if len(found) == 1 else None


def visible_gpus(env_value: str | None, count: int, uuids: Sequence[str]) -> tuple[int, ...] | None:
    """The NVML indexes ``CUDA_VISIBLE_DEVICES`` names, in its order; None when it is unset."""
    entries = visible_devices(env_value)
    if entries is None:
        return None
    out: list[int] = []
    for entry in entries:
        if entry.lower().startswith("mig-"):
            continue  # a slice of a GPU: NVML's per-GPU figures are the whole GPU's
        index = int(entry) if entry.isdecimal() else _by_uuid(entry, uuids)
        if index is None or not 0 <= index < count:
            break  # CUDA stops at the first entry that names no GPU
        if index not in out:
            out.append(index)
    return tuple(out)


def choose_gpus(
    count: int, uuids: Sequence[str], requested: Sequence[int] | None, env_value: str | None
) -> tuple[int, ...]:
    """The GPUs to watch: ``requested`` (checked), else ``CUDA_VISIBLE_DEVICES``'s, else all."""
    if requested is not None:
        return requested_gpus(requested, count)
    visible = visible_gpus(env_value, count, uuids)
    return tuple(range(count)) if visible is None else visible
