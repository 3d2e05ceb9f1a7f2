"""Numbers read from another process's message or a file's text, where anything may stand: the
number, or a default where it is none (``int_or``, ``float_or``). Torch-free."""

from __future__ import annotations

import math
from typing import Any


def int_or(value: Any, default: int = 0) -> int:
    """``value`` as a whole number (``"12"``, ``12``, ``12.0``); ``default`` where it is none."""
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return default


def float_or(value: Any, default: float = 0.0) -> float:
    """``value`` as a finite number; ``default`` where it is none (text, None, NaN, infinity)."""
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):  # (an integer past a float's range)
        return default
    return number if math.isfinite(number) else default
