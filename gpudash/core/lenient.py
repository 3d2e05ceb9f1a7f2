"""Numbers read from another process's message or a file's text, where anything may stand: the
number, or a default (or None) where it is none. The one place such a number is read: a module
never keeps a private ``_int``/``_float`` of its own. Torch-free."""

from __future__ import annotations

import math
from typing import Any


def int_or(value: Any, default: int = 0) -> int:
    """``value`` as a whole number (``"12"``, ``12``, ``12.0``); ``default`` where it is none."""
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return default


def int_or_none(value: Any) -> int | None:
    """``value`` as a whole number, as ``int_or`` reads it; None where it is none."""
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return None


def count_or(value: Any, default: int = 0) -> int:
    """A count or a size that a message gave as a whole number (an int, not a bool, not below
    zero); ``default`` for anything else (text, a float, a negative number)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else default


def float_or(value: Any, default: float = 0.0, within: float = math.inf) -> float:
    """``value`` as a finite number of magnitude under ``within``; ``default`` where it is none
    (text, None, NaN, infinity, or a number as large as ``within``)."""
    number = float_or_none(value)
    return number if number is not None and abs(number) < within else default


def float_or_none(value: Any) -> float | None:
    """``value`` as a finite number; None where it is none (text, None, NaN, infinity)."""
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):  # (an integer past a float's range)
        return None
    return number if math.isfinite(number) else None
