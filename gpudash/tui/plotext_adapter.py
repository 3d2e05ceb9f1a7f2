"""The one place that reaches into plotext's and textual-plotext's private parts (an adapter
allowed by tests/test_private_apis.py).

``render_plot(plot, width, height)`` sizes a plotext figure and returns it as a Rich
``Text``. The fast path reads plotext's character matrix directly: plotext would join it
into one ANSI string and Rich would parse it back, a round trip that costs as much as
building the plot. It leans on internals (``_set_size``, ``_set_sizes``, ``_build_matrix``,
``monitor.matrix``, ``plotext._utility``) checked here at import against the plotext
versions it was written for (5.x); on any other version, or if an internal is missing at
run time (AttributeError), it uses the public ``build()`` path: slower, not broken.
``canvas_columns`` reads the matrix's data columns to turn a mouse column into a time
(textual-plotext has no public way to read the canvas size: Textualize/textual-plotext#17).
``plotext_theme_name`` is textual-plotext's private name of the theme a widget draws with.
Everything else uses the public ``PlotextPlot.plt``.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Any

from rich.style import Style
from rich.text import Text

TESTED_MAJOR = 5  # pyproject pins plotext<6


def _plotext_major() -> int | None:
    try:
        return int(version("plotext").split(".", 1)[0])
    except (PackageNotFoundError, ValueError):
        return None


try:  # private plotext module: only on the version the fast path was written for
    if _plotext_major() != TESTED_MAJOR:
        raise ImportError("untested plotext version")
    import plotext._utility as _utility
except ImportError:  # pragma: no cover - only on a plotext that moved it
    _utility = None

FAST_PATH = _utility is not None


def plotext_theme_name(widget: Any) -> str:
    """The plotext theme a ``PlotextPlot`` draws with (``textual-auto-<app theme>`` under its
    "auto" theme, the one ``PlotextPlot`` registers with plotext). textual-plotext names it only
    in a private method, ``_get_plotext_theme_name``, and registers that theme itself, so a name
    worked out here could drift from the one it registers; no upstream issue found."""
    return widget._get_plotext_theme_name(widget.app.theme)


def size_plot(plot: Any, width: int, height: int) -> None:
    """Size the figure; textual-plotext's ``_set_size`` is its own resize workaround
    (Textualize/textual-plotext#5: ``plotsize`` alone does not resize a figure already drawn)."""
    plot.plotsize(width, height)
    set_size = getattr(plot, "_set_size", None)
    if set_size is not None:
        set_size(width, height)


def render_plot(plot: Any, fast: bool = True) -> tuple[Text, bool]:
    """The sized figure as Rich Text, and whether the fast path may be used next time."""
    if fast and FAST_PATH:
        try:
            plot._set_sizes()
            plot._build_matrix()
            return matrix_to_text(plot.monitor.matrix), True
        except AttributeError:
            pass  # plotext internals changed: the public path from now on
    return Text.from_ansi(plot.build()), False


def canvas_columns(plot: Any) -> range | None:
    """The columns of the last rendered figure that hold data (between the y axes), or None
    when plotext's matrix does not say (not rendered yet, or its internals moved)."""
    cols = getattr(getattr(getattr(plot, "monitor", None), "matrix", None), "Cols_canvas", None)
    return cols if isinstance(cols, range) and len(cols) > 1 else None


def column_to_x(col: int, cols: range, xlim: tuple[float, float]) -> float:
    """The x value at a terminal column: the inverse of plotext's data → column mapping
    (``floor(0.5 + (n - 1) * (x - x0) / (x1 - x0))``), clamped to the canvas."""
    c = min(max(col, cols.start), cols.stop - 1) - cols.start
    x0, x1 = xlim
    return x0 + c / (len(cols) - 1) * (x1 - x0)


_STYLES: dict[tuple[object, object, object], Style] = {}


def _style(fg: object, style: object, bg: object) -> Style:
    key = (fg, style, bg)
    got = _STYLES.get(key)
    if got is None:
        ansi = _utility.colors_to_ansi(fg, style, bg)
        t = Text.from_ansi(ansi + "x" + _utility.ansi_end)
        span_style = t.spans[0].style if t.spans else Style()
        got = span_style if isinstance(span_style, Style) else Style.parse(str(span_style))
        if len(_STYLES) < 4096:
            _STYLES[key] = got
    return got


def matrix_to_text(m: Any) -> Text:
    """A plotext matrix (characters, foreground, style, background by cell) as a Rich Text."""
    text = Text(no_wrap=True, overflow="crop", end="")
    append = text.append
    cols = m.cols
    markers, fgs, sts, bgs = m.marker, m.fullground, m.style, m.background
    for row in range(m.rows - 1, -1, -1):
        mk, fg, st, bg = markers[row], fgs[row], sts[row], bgs[row]
        a = 0
        while a < cols:
            key = (fg[a], st[a], bg[a])
            b = a + 1
            while b < cols and fg[b] == key[0] and st[b] == key[1] and bg[b] == key[2]:
                b += 1
            append("".join(mk[a:b]), _style(*key))
            a = b
        if row:
            append("\n")
    return text
