"""Bounded (time, value) series for the charts: a sliding window (live) or the whole run at a
falling resolution (replay), and bucket-averaged down to what a chart can show."""

from __future__ import annotations

from bisect import bisect_left
from collections import deque


class Series:
    """(time, value) points, bounded; ``None`` values are kept out (they leave a gap)."""

    def __init__(self, maxlen: int = 600, mode: str = "window") -> None:
        if mode not in ("window", "whole"):
            raise ValueError(f"mode must be 'window' or 'whole', got {mode!r}")
        self.maxlen = maxlen
        self.mode = mode
        self.t: deque[float] = deque(maxlen=maxlen if mode == "window" else None)
        self.v: deque[float] = deque(maxlen=maxlen if mode == "window" else None)
        self._stride = 1
        self._skip = 0

    def append(self, t: float, value: float | None) -> None:
        if value is None:
            return
        if self.mode == "whole":
            if self._skip:
                self._skip -= 1
                return
            self._skip = self._stride - 1
            if len(self.t) >= self.maxlen:
                self.t = deque(list(self.t)[::2])
                self.v = deque(list(self.v)[::2])
                self._stride *= 2
                self._skip = self._stride - 1
        self.t.append(t)
        self.v.append(float(value))

    def __len__(self) -> int:
        return len(self.t)

    def clear(self) -> None:
        self.t.clear()
        self.v.clear()
        self._stride, self._skip = 1, 0

    @property
    def first_t(self) -> float | None:
        return self.t[0] if self.t else None

    @property
    def last_t(self) -> float | None:
        return self.t[-1] if self.t else None

    def points(self, t0: float, t1: float, max_points: int) -> tuple[list[float], list[float]]:
        """The points within [t0, t1], bucket-averaged down to at most ``max_points``."""
        pts = [(t, v) for t, v in zip(self.t, self.v, strict=False) if t0 <= t <= t1]
        return downsample(pts, max_points)

    def nearest(self, t: float, t0: float, t1: float) -> tuple[float, float] | None:
        """The kept point within [t0, t1] closest in time to ``t`` (None: none there)."""
        times = list(self.t)
        i = bisect_left(times, min(max(t, t0), t1))  # the window's points are contiguous: look beside it
        near = [j for j in (i - 1, i) if 0 <= j < len(times) and t0 <= times[j] <= t1]
        if not near:
            return None
        j = min(near, key=lambda k: abs(times[k] - t))
        return times[j], self.v[j]


def downsample(pts: list[tuple[float, float]], max_points: int) -> tuple[list[float], list[float]]:
    """Average consecutive points in equal-count buckets so at most ``max_points`` remain."""
    n = len(pts)
    if max_points <= 0 or n <= max_points:
        return [p[0] for p in pts], [p[1] for p in pts]
    xs: list[float] = []
    ys: list[float] = []
    step = n / max_points
    for i in range(max_points):
        a, b = int(i * step), int((i + 1) * step)
        chunk = pts[a:b] or pts[a : a + 1]
        xs.append(sum(p[0] for p in chunk) / len(chunk))
        ys.append(sum(p[1] for p in chunk) / len(chunk))
    return xs, ys
