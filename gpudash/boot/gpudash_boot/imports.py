"""The import watch of gpudash's bootstrap and hooks inside a job: something done right after a
module of the job's has finished importing (torch: the hooks go in; a checkpoint library: its save
functions timed). Standard library only: the bootstrap (``sitecustomize.py``) imports it as the job
starts, and the hooks (``phase_signals.py``) use it again.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from collections.abc import Callable, Collection
from typing import Any


class ImportWatch(importlib.abc.MetaPathFinder):
    """Finds nothing itself: each spec found for a module of ``names`` gets its loader wrapped, so
    that ``then(module)`` runs right after the module has finished importing (a failure there never
    fails the job's import). ``once``: the watch leaves ``sys.meta_path`` at the first such import,
    and ``then`` runs only if it was still there. Until then it stays: a library that asks
    ``importlib.util.find_spec`` before importing (transformers, accelerate, datasets) gets a spec
    of its own, and the real import a fresh one."""

    def __init__(self, names: Collection[str], then: Callable[[Any], None], once: bool = False) -> None:
        self.names = names
        self.then = then
        self.once = once
        self._finding = False

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name not in self.names or self._finding:
            return None
        self._finding = True
        try:
            spec = importlib.util.find_spec(name)
        finally:
            self._finding = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        original = spec.loader.exec_module
        watch = self

        def exec_module(module: Any) -> None:
            original(module)
            if watch.once:
                if watch not in sys.meta_path:
                    return
                sys.meta_path.remove(watch)
            try:
                watch.then(module)
            except Exception:  # noqa: BLE001, S110 - the job's import must not fail for gpudash
                pass

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec
