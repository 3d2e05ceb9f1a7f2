"""The kinds a training job's memory holds, as gpudash names them, and bytes as it writes them."""

from __future__ import annotations

KINDS = ("params", "grads", "optimizer", "activations")  # the kinds, in the bar's and the line's order
NAMES = {"params": "parameters", "grads": "gradients", "optimizer": "optimizer state", "activations": "activations"}


def size(n: float) -> str:
    """Bytes in binary units, 3 significant digits: ``41.2 GiB``, ``812 KiB``, ``64 B``."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f} B"
