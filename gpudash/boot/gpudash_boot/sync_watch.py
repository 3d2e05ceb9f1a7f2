"""Torch's word of each host-device sync on the training thread, passed on with the frame that made
it: its sync warning, raised under ``torch.cuda.set_sync_debug_mode("warn")`` (a ``SyncWatch``
stands in for ``warnings.showwarning``), and each explicit wait (``SyncWatch.waited``, the hook of
``explicit_waits.py``). The engine's sync counter and the job's (``syncs.py``) share it: standard
library only."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from types import FrameType

SYNC_WARNING = "called a synchronizing CUDA operation"  # torch's warning at each sync, in "warn" mode


class SyncWatch:
    """The syncs of the thread that made it, each told to ``counted`` with the frame that made it (a
    sync on another thread is not the step's). As ``warnings.showwarning``: a sync warning is shown
    to no one, unless ``passing()`` (a job that set the debug mode itself: its warnings are its
    own); any other warning goes on to ``shown_before``, the handler this one stands in for."""

    def __init__(
        self,
        counted: Callable[[FrameType], None],
        shown_before: Callable[..., Any],
        passing: Callable[[], bool] = lambda: False,
    ) -> None:
        self.thread = threading.get_ident()
        self.counted = counted
        self.shown_before = shown_before
        self.passing = passing

    def __call__(
        self, message: Any, category: Any, filename: str, lineno: int, file: Any = None, line: Any = None
    ) -> None:
        if SYNC_WARNING in str(message) and not self.passing():
            if threading.get_ident() == self.thread:
                self.counted(sys._getframe(1))
            return
        self.shown_before(message, category, filename, lineno, file, line)

    def waited(self) -> None:
        """An explicit wait (``torch.cuda.synchronize()``, ``Event.synchronize()``), told before it waits."""
        if threading.get_ident() == self.thread:
            self.counted(sys._getframe(1))
