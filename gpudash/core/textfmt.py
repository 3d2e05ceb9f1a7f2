"""Numbers and durations as the dashboard and reports print them, and text read from files
made safe to print (``strip_controls``)."""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from gpudash.stats.comparison import Comparison, Estimate

MINUS = "\u2212"  # a typographic minus: "−2", as the intervals print it
SHOWN_PATH_CHARS = 80  # a path longer than this is shortened in messages (one line stays readable)


def shown(path: str) -> str:
    """``path`` for a one-line message: its start and end when it is very long."""
    if len(path) <= SHOWN_PATH_CHARS:
        return path
    half = SHOWN_PATH_CHARS // 2 - 1
    return f"{path[:half]}…{path[-half:]} ({len(path)} characters)"


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


def fmt_duration(seconds: float) -> str:
    s = max(0, int(seconds))
    h, rem = divmod(s, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


def fmt_pm(e: Estimate | None) -> str:
    """ "48.2 ± 1.3": the half-width to 2 significant digits, the mean to the same decimals."""
    if e is None:
        return "–"
    if e.half_width is None or not math.isfinite(e.half_width) or not math.isfinite(e.mean):
        return f"{fmt_num(e.mean)} (no CI)"  # none, or none that a number can say (values near 1e308)
    hw = e.half_width
    if hw <= 0:
        return f"{fmt_num(e.mean)} ± 0"
    digits = max(0, 1 - math.floor(math.log10(hw)))
    return f"{e.mean:.{digits}f} ± {hw:.{digits}f}"


def _signed(v: float, decimals: int) -> str:
    text = f"{v:+.{decimals}f}"
    return MINUS + text[1:] if text.startswith("-") else text


def fmt_ratio(c: Comparison) -> str:
    """A ratio and its interval, one way everywhere: "1.08× [0.98–1.19]"; "1.08× (no CI)" without
    one. The interval of a ratio is asymmetric (it is taken on the log), so never "± half-width"; a
    third decimal when the interval is narrower than 0.01, so its ends never print the same."""
    if not c.finite:
        return "–"
    if c.low is None or c.high is None:
        return f"{c.ratio:.2f}× (no CI)"
    digits = 3 if c.high - c.low < 0.01 else 2
    return f"{c.ratio:.{digits}f}× [{c.low:.{digits}f}–{c.high:.{digits}f}]"


def fmt_change(c: Comparison) -> str:
    """The same as a change in percent: "+8% (−2 … +19%)"; "+8% (no CI)" without an interval.
    One decimal where the interval is under 10 points wide and its ends under 100%."""
    change, interval = change_parts(c)
    return f"{change} ({interval})" if change != "–" else change


def change_parts(c: Comparison) -> tuple[str, str]:
    """``fmt_change``'s two halves, ("+8%", "−2 … +19%"), for a cell of two lines."""
    if not c.finite:
        return "–", ""
    change = (c.ratio - 1.0) * 100.0
    if c.low is None or c.high is None:
        return f"{_signed(change, 0 if abs(change) >= 10 else 1)}%", "no CI"
    low, high = (c.low - 1.0) * 100.0, (c.high - 1.0) * 100.0
    d = 1 if high - low < 10 and max(abs(low), abs(high)) < 100 else 0
    return f"{_signed(change, d)}%", f"{_signed(low, d)} … {_signed(high, d)}%"


def fmt_needs(seconds: float | None) -> str:
    """What a window without an interval lacks: "needs ≈ 12 s more"; "needs more (its samples
    drift)" when it has enough samples but they are too correlated for one (more will do)."""
    if seconds is None:
        return ""
    if seconds <= 0:
        return "needs more (its samples drift)"
    return f"needs ≈ {math.ceil(seconds)} s more"


def markdown_table(headers: list[str], rows: list[list[str]]) -> str:
    """A GitHub Markdown table; ``|`` in a cell is escaped."""

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    return "\n".join([line(headers), "|" + "---|" * len(headers), *(line(r) for r in rows)]) + "\n"


_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f]")  # C0, DEL and C1: ESC, BEL, CSI (U+009B), OSC (U+009D)…
_CONTROLS_BUT_NEWLINE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f]")


def strip_controls(text: str, *, keep_newlines: bool = False) -> str:
    """``text`` without control characters (C0, DEL, C1), so a terminal that shows it (or a
    ``cat`` of a report) runs no escape sequence read from a file; printable Unicode is kept.
    ``keep_newlines``: keep the line feed (a CSV's records end with one)."""
    return (_CONTROLS_BUT_NEWLINE if keep_newlines else _CONTROLS).sub("", text)


def clip(text: str, width: int = 300) -> str:
    """``text`` cut to ``width`` characters, "…" at the end when cut (a message quoting a huge cell)."""
    return text if len(text) <= width else text[: width - 1] + "…"
