"""Host-device syncs of a job's training thread, counted by line from its first step for gpudash's
hooks (``hooks.py``): torch's sync warnings (its sync debug mode set to "warn") and the explicit
waits (``explicit_waits.py``), taken as gpudash's engine takes them (``sync_watch.py``) and each put
to its line (``sync_sites.py``). CUDA only. Standard library and the job's own torch only.

One private API of torch: ``torch._C._cuda_set_sync_debug_mode``, the sync debug mode set from any
thread without the Python warning and the filter changes of ``torch.cuda.set_sync_debug_mode``.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator
from typing import Any

from . import explicit_waits
from .sync_sites import LiveSites, StepSites
from .sync_watch import SYNC_WARNING, SyncWatch

JOB_OWNS_MODE = "not counted: the job sets torch.cuda.set_sync_debug_mode itself, and gpudash leaves its mode as it is"
FILTERS = ("simplefilter", "filterwarnings", "resetwarnings")  # the job's ways to change the filters


class SyncCount:
    """Host-device syncs of the training thread, by line (torch's sync warnings and the explicit
    waits), from the first step on. The job's own warnings filters never turn a sync's warning
    into an error (the filter that shows it stays first, however the job changes them), and a job
    that sets the sync debug mode itself keeps it: then no sync is counted, and gpudash says so."""

    def __init__(self, torch: Any, on_wait: Callable[[], None] | None = None) -> None:
        self.torch = torch
        self.count = 0
        self.on_wait = on_wait  # told of each sync counted (phases.py: the job waits on its GPU)
        self.live, self.sites = LiveSites(), StepSites()  # by line, over the training steps alone
        self.not_counted = ""
        self.paused = False  # while gpudash itself works inside a step (a profiler window's start and end)
        self.job_owns_mode = False  # the job set the sync debug mode: it is the job's, nothing is counted
        self._quiet_depth = 0  # blocks in which the debug mode is off (``quiet``)
        self._set_mode = torch.cuda.set_sync_debug_mode
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "a prototype feature"
            self._prev_mode = torch.cuda.get_sync_debug_mode()
        if self._prev_mode != 0:  # set before its first step: the job's
            self.job_owns_mode, self.not_counted = True, JOB_OWNS_MODE
            return
        self._saved = warnings.catch_warnings()
        self._saved.__enter__()
        self._filters = {name: getattr(warnings, name) for name in FILTERS}
        for name, original in self._filters.items():
            setattr(warnings, name, self._first_after(original))
        warnings.filterwarnings("always", message=".*" + SYNC_WARNING)
        self._watch = SyncWatch(self._counted, warnings.showwarning, lambda: self.job_owns_mode)
        warnings.showwarning = self._watch
        torch.cuda.set_sync_debug_mode = self._jobs_mode
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self._set_mode("warn")
        self.not_counted = explicit_waits.start(torch, self._watch.waited) or ""

    @contextlib.contextmanager
    def quiet(self) -> Iterator[None]:
        """A block in which torch may sync on threads whose warnings it prints itself (backward's
        device threads, DDP's and torch.distributed's C++), or gpudash's own (a profiler window's start
        and end): the debug mode off, nothing counted (an explicit wait neither)."""
        was, self.paused = self.paused, True
        if self.job_owns_mode or not hasattr(self, "_saved"):
            try:
                yield
            finally:
                self.paused = was
            return
        self._quiet_depth += 1
        if self._quiet_depth == 1:
            self._set_mode_quietly(0)
        try:
            yield
        finally:
            self._quiet_depth -= 1
            self.paused = was
            if self._quiet_depth == 0 and not self.job_owns_mode:
                self._set_mode_quietly(1)

    def _set_mode_quietly(self, mode: int) -> None:
        """The debug mode set (0: off, 1: warn) without a Python warning or a change of filters."""
        setter = getattr(self.torch._C, "_cuda_set_sync_debug_mode", None)
        if setter is not None:
            setter(mode)
            return
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "a prototype feature"
            self._set_mode(mode)

    def _first_after(self, original: Any) -> Any:
        """``original`` (a function of ``warnings`` that changes the filters), then the filter that
        shows a sync's warning put first again."""

        def changed(*args: Any, **kwargs: Any) -> Any:
            result = original(*args, **kwargs)
            if not self.job_owns_mode:
                self._filters["filterwarnings"]("always", message=".*" + SYNC_WARNING)
            return result

        return changed

    def _jobs_mode(self, debug_mode: Any) -> None:
        """The job sets the sync debug mode: it is the job's from now on (its warnings its own)."""
        self.job_owns_mode, self.not_counted = True, JOB_OWNS_MODE
        self._set_mode(debug_mode)

    def keep_watching(self) -> None:
        """At a step boundary: put the handler and the filter back if the job displaced them
        (``logging.captureWarnings``, a ``catch_warnings`` block, ``simplefilter``)."""
        if self.job_owns_mode:
            return
        if warnings.showwarning is not self._watch:  # (never take our own handler as the one before it)
            self._watch.shown_before = warnings.showwarning
            warnings.showwarning = self._watch
        first = warnings.filters[0] if warnings.filters else None
        if first is None or first[0] != "always" or first[1] is None or not first[1].pattern.endswith(SYNC_WARNING):
            warnings.filterwarnings("always", message=".*" + SYNC_WARNING)

    def step_ended(self, own: bool) -> None:
        """A step's end: its syncs by line go to the table where they are the training's own
        (``own``); an evaluation's, a checkpoint's or a compile's before it, or the first step's
        start-up, are left out of it (a phase's syncs are not the step's)."""
        self.count = 0
        self.sites.step_ended(own)

    def close(self) -> None:
        if not hasattr(self, "_saved"):
            return  # the job's mode from the start: nothing was changed
        explicit_waits.stop(self.torch, self._watch.waited)
        if self.torch.cuda.set_sync_debug_mode == self._jobs_mode:
            self.torch.cuda.set_sync_debug_mode = self._set_mode
        if not self.job_owns_mode:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                self._set_mode(self._prev_mode)
        for name, original in self._filters.items():
            setattr(warnings, name, original)
        self._saved.__exit__(None, None, None)

    def _counted(self, frame: Any) -> None:
        if self.paused or self.job_owns_mode:
            return  # gpudash's own (the profiler's synchronize at a window's start and end), or not counted
        self.count += 1
        self.sites.add_site(self.live.site(frame))
        if self.on_wait is not None:
            self.on_wait()
