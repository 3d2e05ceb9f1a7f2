"""The words of a torchrun job's "world" event (``gpudash.ranks.world`` says it; ``gpudash report``
and ``replay`` read it back to join the nodes' recordings): where its clock's zero falls in Unix
time, which host it names, and each rank's GPU by NVML index. Ground floor: read by records and
commands alike."""

from __future__ import annotations

import re

CLOCK_WORDS = "time 0 at unix"  # the world event's message says its clock's zero thus: "time 0 at unix 1764.5"
_CLOCK = re.compile(re.escape(CLOCK_WORDS) + r" (\d+(?:\.\d+)?)")
_HOST = re.compile(r"\(host ([^)]*)\)")
RANK_GPUS = "rank_gpus"  # its details' key, and its message's words: "GPUs by rank (NVML index) 0:0 1:1"
GPU_WORDS = "GPUs by rank (NVML index)"
_GPUS = re.compile(re.escape(GPU_WORDS) + r"((?: \d+:\d+)+)")


def clock_zero(message: str) -> float | None:
    """The Unix time of a world event's time 0, from its message; None where it gives none."""
    m = _CLOCK.search(message)
    return float(m.group(1)) if m else None


def host_of(message: str) -> str:
    """The host a world event's message names ("" where none)."""
    m = _HOST.search(message)
    return m.group(1) if m else ""


def gpu_words(gpus: dict[int, int]) -> str:
    """The message's words for each rank's GPU ("GPUs by rank (NVML index) 0:0 1:1"; "" for none)."""
    return f"{GPU_WORDS} " + " ".join(f"{r}:{i}" for r, i in sorted(gpus.items())) if gpus else ""


def rank_gpus(message: str) -> dict[int, int]:
    """Each rank's GPU (NVML index) that a world event's message names ({} where none)."""
    m = _GPUS.search(message)
    pairs = (item.split(":") for item in m.group(1).split()) if m else ()
    return {int(r): int(i) for r, i in pairs}
