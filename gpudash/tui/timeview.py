"""The charts' shared time window: the whole run, or a zoomed part of it (scroll wheel).

Textual-free. ``window(t0, t1)`` maps the data's range to what the charts show. Zoomed in at
the right edge, the window follows new samples; zoomed in anywhere else, it stays where it was
put (clamped to the data that is still kept), so a stretch of history can be read while the
run goes on. ``reset()`` shows the whole run again.
"""

from __future__ import annotations

ZOOM_IN = 0.8  # one wheel notch: the span × this
ZOOM_OUT = 1 / ZOOM_IN
MIN_SPAN_S = 2.0  # a few samples at the default interval: no narrower


class TimeView:
    """A span (None: everything) and a right edge (None: follow the newest sample)."""

    def __init__(self) -> None:
        self.span_s: float | None = None
        self.end_s: float | None = None

    @property
    def zoomed(self) -> bool:
        return self.span_s is not None

    def reset(self) -> None:
        self.span_s = self.end_s = None

    def window(self, t0: float, t1: float) -> tuple[float, float]:
        """The part of the data's range ``[t0, t1]`` the charts show."""
        if self.span_s is None or self.span_s >= t1 - t0:
            return t0, t1
        end = t1 if self.end_s is None else min(max(self.end_s, t0 + self.span_s), t1)
        return end - self.span_s, end

    def zoom(self, at_s: float, factor: float, t0: float, t1: float) -> None:
        """Scale the shown span by ``factor`` keeping the time ``at_s`` where it is on screen.

        Zooming out to the whole range resets; a window whose right edge reaches the newest
        data follows it from then on."""
        a, b = self.window(t0, t1)
        at = min(max(at_s, a), b)
        span = max(MIN_SPAN_S, (b - a) * factor)
        if span >= t1 - t0:
            self.reset()
            return
        start = at - (at - a) / (b - a) * span if b > a else a
        start = min(max(start, t0), t1 - span)
        end = start + span
        self.span_s = span
        self.end_s = None if end >= t1 - 1e-9 else end

    def describe(self, t0: float, t1: float) -> str:
        """What the charts show, for the message bar."""
        a, b = self.window(t0, t1)
        if not self.zoomed:
            return f"time axis: the whole run ({b - a:.0f} s)"
        where = "following the newest samples" if self.end_s is None else f"{a:.1f}–{b:.1f} s"
        return f"time axis: {b - a:.1f} s of {t1 - t0:.0f} s, {where} · 0 shows the whole run"
