"""An arm run from another checkout of gpudash (an older commit's ``git worktree``, say): the tree
checked, and the environment that makes a Python subprocess import that tree's ``gpudash`` and
``workloads`` first."""

from __future__ import annotations

import os
from pathlib import Path

from benchmarks.harness.case import Unavailable


def checkout_path(text: str) -> Path:
    """The checkout at ``text``, resolved; one without ``gpudash/__main__.py`` is refused."""
    tree = Path(text).expanduser().resolve()
    if not (tree / "gpudash" / "__main__.py").is_file():
        raise Unavailable(f"{text}: not a checkout of gpudash (no gpudash/__main__.py there)")
    return tree


def checkout_env(tree: Path) -> dict[str, str]:
    """This process's environment with ``tree`` first on PYTHONPATH (what was there after it: the
    dependencies may live there)."""
    path = os.pathsep.join(p for p in (str(tree), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path}
