"""Numbers and durations as the dashboard and reports print them, and text read from files
made safe to print (``strip_controls``)."""

from __future__ import annotations

import math
import re

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


def plain(v: float | None, significant: int = 4) -> str:
    """A number as a person reads it once: ``significant`` digits, plain notation, thousands
    separated (``40,760``, ``0.4996``, ``502``); '–' when not available."""
    if v is None or not math.isfinite(v):
        return "–" if v is None else str(v)
    if v == 0:
        return "0"
    decimals = significant - 1 - math.floor(math.log10(abs(v)))
    return _at(v, min(decimals, 12))


def plain_pm(mean: float, half_width: float | None, *, column: bool = False) -> str:
    """``mean ± half_width`` at the precision the interval has: the one routine that writes an
    interval this way. In a line read once (``502 ± 9``, ``0.4996 ± 0.0001``, ``40,800 ± 1,500``):
    the half-width to one significant digit, two where it starts with 1 to 3.5 (1.5 is not rounded
    to 2), and the mean to the same place, never to more than four significant digits. In a
    report's column (``column``: ``48.2 ± 1.3``, ``12346 ± 150``): the half-width to two significant
    digits, never rounded past the units, and the mean to the same decimals, without separators."""
    if half_width is None or not math.isfinite(half_width) or not math.isfinite(mean):
        return plain(mean)
    if half_width <= 0:
        return f"{fmt_num(mean) if column else plain(mean)} ± 0"
    decimals = _column_decimals(half_width) if column else _read_decimals(mean, half_width)
    shown_width = max(round(half_width, decimals), 10.0**-decimals)  # never "± 0" for a real interval
    return f"{_at(mean, decimals, grouped=not column)} ± {_at(shown_width, decimals, grouped=not column)}"


def _read_decimals(mean: float, half_width: float) -> int:
    """``plain_pm``'s decimals in a line read once (negative: to tens, hundreds, …)."""
    place = math.floor(math.log10(half_width))
    lead = half_width / 10**place  # 1.0 <= lead < 10
    decimals = 1 - place if lead < 3.55 else -place
    if mean != 0:
        decimals = min(decimals, 3 - math.floor(math.log10(abs(mean))))
    return min(decimals, 12)


def _column_decimals(half_width: float) -> int:
    """``plain_pm``'s decimals in a report's column: two significant digits of the half-width, or none."""
    return max(0, 1 - math.floor(math.log10(half_width)))


def _at(v: float, decimals: int, grouped: bool = True) -> str:
    """``v`` rounded to ``decimals`` places (negative: to tens, hundreds, …), thousands separated
    (``grouped``; else ``decimals`` is never negative)."""
    if not grouped:
        return f"{v:.{decimals}f}"
    if decimals >= 0:
        return f"{v:,.{decimals}f}"
    return f"{round(v, decimals):,.0f}"


def fmt_duration(seconds: float) -> str:
    s = max(0, int(seconds))
    h, rem = divmod(s, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


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
