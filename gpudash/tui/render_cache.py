"""Textual's cache of escape codes, keyed by what the codes depend on (not by screen position).

Textual gives each segment of a widget's content a Rich style that carries the segment's screen
offset (``{"offset": (x, y)}``, for text selection), and ``Strip.render_ansi`` caches each style's
escape codes in an ``lru_cache`` of 16,384 keyed by the whole style, offset included. So the cache
kept one style for every (colours, position) ever drawn, about 950 bytes each: as the charts' lines
moved over the screen it filled for the first ten to fifteen minutes of a run, to ~2,100 entries
(2 MiB) at 120×36 and ~7,600 (7 MiB) at 240×70, up to 16,384 (15 MiB) on a larger terminal. The
dashboard's RSS grew by that much in a real terminal (a headless app never renders its frames to
escape codes, so the pilot soak did not see it).

The codes depend only on the colours, the attributes and the colour system: ``bound_render_ansi``
puts a cache keyed by those in front of Textual's function (a few hundred entries for the
dashboard, at most ``MAX_CODES``). It leans on Textual's and Rich's private names (checked when it
is installed); where they moved, Textual's own cache stays: more memory, nothing broken.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.color import ColorSystem
from rich.style import Style
from textual.strip import Strip

MAX_CODES = 4096  # escape codes kept: one per colours × attributes × colour system (the dashboard uses hundreds)

_codes: dict[tuple[Any, ...], str] = {}
_MARK = "_gpudash_keyed_by_codes"  # set on the installed function: installing twice is a no-op


def _key(style: Style, color_system: ColorSystem) -> tuple[Any, ...]:
    """What a style's escape codes depend on (not its meta: the offset, click handlers)."""
    return (style._color, style._bgcolor, style._attributes, style._set_attributes, color_system)


def _keyed(original: Callable[[type[Strip], Style, ColorSystem], str]) -> Callable[..., str]:
    def render_ansi(cls: type[Strip], style: Style, color_system: ColorSystem) -> str:
        key = _key(style, color_system)
        ansi = _codes.get(key)
        if ansi is None:
            ansi = original(cls, style, color_system)
            if len(_codes) >= MAX_CODES:
                _codes.clear()  # never reached by the dashboard; a bound whatever draws
            _codes[key] = ansi
        style._ansi = ansi  # as Textual's does: this style object asks no more
        return ansi

    setattr(render_ansi, _MARK, True)
    return render_ansi


def bound_render_ansi() -> bool:
    """Install the keyed cache in front of ``Strip.render_ansi`` (once); False where Textual's
    function is not the ``lru_cache`` it is written for (then Textual's own cache stays)."""
    current = Strip.__dict__.get("render_ansi")
    func = getattr(current, "__func__", None)
    if getattr(func, _MARK, False):
        return True
    original = getattr(func, "__wrapped__", None)
    cache_clear = getattr(func, "cache_clear", None)
    if original is None or cache_clear is None or not _has_private_names():
        return False
    cache_clear()  # the styles it kept so far
    Strip.render_ansi = classmethod(_keyed(original))  # type: ignore[method-assign, assignment]  # the patch of Textual's cache
    return True


def _has_private_names() -> bool:
    style = Style(color="red")
    return all(hasattr(style, name) for name in ("_color", "_bgcolor", "_attributes", "_set_attributes", "_ansi"))


def cached_escape_codes() -> int:
    """How many entries cache escape codes now: the keyed cache's, else Textual's ``lru_cache``'s."""
    func = getattr(Strip.__dict__.get("render_ansi"), "__func__", None)
    if getattr(func, _MARK, False):
        return len(_codes)
    info = getattr(func, "cache_info", None)
    return info().currsize if info is not None else 0
