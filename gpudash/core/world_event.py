"""The words of a torchrun job's "world" event (``gpudash.job.world`` says it; ``gpudash report``
and ``replay`` read it back to join the nodes' recordings): where its clock's zero falls in Unix
time and which host it names. Ground floor: read by records and commands alike."""

from __future__ import annotations

import re

CLOCK_WORDS = "time 0 at unix"  # the world event's message says its clock's zero thus: "time 0 at unix 1764.5"
_CLOCK = re.compile(re.escape(CLOCK_WORDS) + r" (\d+(?:\.\d+)?)")
_HOST = re.compile(r"\(host ([^)]*)\)")


def clock_zero(message: str) -> float | None:
    """The Unix time of a world event's time 0, from its message; None where it gives none."""
    m = _CLOCK.search(message)
    return float(m.group(1)) if m else None


def host_of(message: str) -> str:
    """The host a world event's message names ("" where none)."""
    m = _HOST.search(message)
    return m.group(1) if m else ""
