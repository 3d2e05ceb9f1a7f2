"""The kinds a training job's memory holds, as gpudash names them, and bytes as it writes them."""

from __future__ import annotations

import math
from typing import Any

from workloads.limits import size as size  # bytes as gpudash writes them: one formatter, beside the memory arithmetic

KINDS = ("params", "frozen", "grads", "optimizer", "activations")  # the kinds, in the bar's and the line's order
NAMES = {
    "params": "parameters",
    "frozen": "frozen parameters",  # the step's modules' parameters that need no grad (a teacher's)
    "grads": "gradients",
    "optimizer": "optimizer state",
    "activations": "activations",
}


def byte_count(value: Any) -> int | None:
    """A count of bytes from another process or a file: a finite number, 0 or more (else None)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        return None
    return int(value)
