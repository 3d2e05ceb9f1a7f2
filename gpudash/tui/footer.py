"""Textual's Footer without its leak: every recompose left the old keys alive.

``Footer.compose`` binds each ``FooterKey`` to the footer's ``compact`` reactive (``data_bind``),
which stores ``(key, callback)`` in the *footer's* watcher list. Textual prunes closed widgets
from that list only when ``compact`` changes, which it never does here, so every recompose (one
per ``refresh_bindings``: after each notice, each change of the run) kept the previous keys,
their styles and render caches: the dashboard grew by ~0.3 MiB a minute in the soak
(Textualize/textual#6666). ``LeanFooter`` drops the closed widgets' watchers before composing,
and empties the one style cache that is keyed by widget (``StylesCache.get_inner_outer``, 1024
entries, each holding a widget's render caches), which would otherwise keep the old keys' caches
for another hour of changes (Textualize/textual#6665).

An adapter allowed by tests/test_private_apis.py: Textual has no public way to drop a watcher or
to clear that cache, so this module reads ``textual.reactive``'s ``__watchers`` lists, a widget's
``_closing`` flag and ``textual._styles_cache.StylesCache``; where they moved, the footer leaks
again and tests/tui/test_footer.py says so.
"""

from __future__ import annotations

from textual._styles_cache import StylesCache
from textual.app import ComposeResult
from textual.widgets import Footer

_WATCHERS = "__watchers"  # where textual.reactive keeps an object's watchers: {attribute: [(node, callback)]}


def prune_closed_watchers(obj: object) -> int:
    """Drop the watchers of closed (removed) widgets from ``obj``'s lists, as Textual does when
    the watched attribute changes; returns how many were dropped."""
    watchers: dict[str, list[tuple[object, object]]] = getattr(obj, _WATCHERS, {})
    dropped = 0
    for entries in watchers.values():
        kept = [(node, callback) for node, callback in entries if not getattr(node, "_closing", False)]
        dropped += len(entries) - len(kept)
        entries[:] = kept
    return dropped


class LeanFooter(Footer):
    """A ``Footer`` whose recomposes do not keep the keys they replace."""

    def compose(self) -> ComposeResult:
        prune_closed_watchers(self)  # the previous keys are removed (closed) by now
        StylesCache.get_inner_outer.cache_clear()  # refilled at once by the widgets on screen
        yield from super().compose()
