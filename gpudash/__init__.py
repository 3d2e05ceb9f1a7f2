"""gpudash: a terminal dashboard and recorder for PyTorch training throughput.

``gpudash.track(path, label=...)`` records your own training loop (docs/track.md). It is
imported on first use, so ``import gpudash`` (and the ``gpudash`` command) stays light.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not typing's: importing typing would cost ``import gpudash`` 3 ms
if TYPE_CHECKING:
    from gpudash.tracking.tracker import Tracker, track

__all__ = ["Tracker", "track"]


def __getattr__(name: str) -> object:
    if name in __all__:
        from gpudash.tracking import tracker

        return getattr(tracker, name)
    raise AttributeError(f"module 'gpudash' has no attribute {name!r}")
