"""Numbers and durations as the dashboard and reports print them."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from gpudash.comparison import Estimate


def fmt_num(v: float | None, width: int = 0) -> str:
    """A compact number: 3 significant figures, thousands as k; '–' when not available."""
    if v is None:
        s = "–"
    else:
        a = abs(v)
        if a >= 100_000:
            s = f"{v / 1000:.0f}k"
        elif a >= 10_000:
            s = f"{v / 1000:.1f}k"
        elif a >= 100:
            s = f"{v:.0f}"
        elif a >= 10:
            s = f"{v:.1f}"
        elif a >= 1:
            s = f"{v:.2f}"
        elif a == 0:
            s = "0"
        else:
            s = f"{v:.3f}"
    return s.rjust(width) if width else s


def fmt_pct(v: float | None) -> str:
    if v is None:
        return "–"
    return f"{v:+.1f}%"


def fmt_duration(seconds: float) -> str:
    s = max(0, int(seconds))
    h, rem = divmod(s, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


def fmt_pm(e: Estimate | None) -> str:
    """"48.2 ± 1.3": the half-width to 2 significant digits, the mean to the same decimals."""
    if e is None:
        return "–"
    if e.half_width is None:
        return f"{fmt_num(e.mean)} (no CI)"
    hw = e.half_width
    if hw <= 0:
        return f"{fmt_num(e.mean)} ± 0"
    digits = max(0, 1 - math.floor(math.log10(hw)))
    return f"{e.mean:.{digits}f} ± {hw:.{digits}f}"


def markdown_table(headers: list[str], rows: list[list[str]]) -> str:
    """A GitHub Markdown table; ``|`` in a cell is escaped."""

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    return "\n".join([line(headers), "|" + "---|" * len(headers), *(line(r) for r in rows)]) + "\n"
