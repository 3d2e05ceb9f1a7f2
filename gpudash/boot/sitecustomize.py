"""gpudash's bootstrap in a job run as ``gpudash -- CMD``: the first ``sitecustomize`` on the job's
``PYTHONPATH``. It runs the ``sitecustomize`` it shadows (if there is one), then waits for the job
to import ``torch`` and only then imports the hooks (``gpudash_boot.hooks``). What this folder puts
on the job's path is this file and one package, ``gpudash_boot``: no other name of gpudash's reaches
the job's modules. It needs the standard library alone: a job whose Python has no gpudash works the
same, and a process that never imports torch is left as it was. Skipped by Python under ``-I``,
``-E`` and ``-S`` (gpudash then says it heard nothing from the job).
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import os
import sys
from typing import Any

_HERE = os.path.dirname(os.path.abspath(__file__))
_PACKAGE = "gpudash_boot"  # the package beside this file


def _chain() -> None:
    """Run the ``sitecustomize`` this one shadows (the next on ``sys.path``, after this folder), as
    Python would have; never one before this folder (one that runs those it shadows would run this
    one again)."""
    folders = [os.path.abspath(p or os.curdir) for p in sys.path]
    rest = sys.path[folders.index(_HERE) + 1 :] if _HERE in folders else sys.path
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None or not spec.origin:
        return
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001 - as site.py does: one line, and Python goes on
        print(f"Error in sitecustomize ({spec.origin}); set PYTHONVERBOSE for traceback: {exc!r}", file=sys.stderr)


def _load(name: str) -> Any:
    """A module of the package beside this file (``wire``), imported from this folder first: a
    module of the job's own by the package's name never stands in for it."""
    sys.path.insert(0, _HERE)
    try:
        return importlib.import_module(f"{_PACKAGE}.{name}")
    finally:
        sys.path.remove(_HERE)


def _install(_torch: Any = None) -> None:
    """Import the hooks and put them in."""
    try:
        _load("hooks").install()
    except Exception as exc:  # noqa: BLE001 - the job goes on without gpudash
        print(f"gpudash: the job's hooks are off: {type(exc).__name__}: {exc}", file=sys.stderr)


def _register(wire: Any) -> None:
    """Say this process's group to gpudash at once, before any import of the job's: a process that
    starts a session of its own (a torchrun rank) is ended with the job even if gpudash is killed
    before the process says anything else. One datagram; a full or gone channel drops it."""
    import socket

    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.setblocking(False)
            word = f'{{"k":"{wire.PROC}","pid":{os.getpid()},"pgid":{os.getpgid(0)}}}'
            sock.sendto(word.encode(), os.environ[wire.CHANNEL_ENV])
    except OSError:
        pass


def _start() -> None:
    """In a process of gpudash's job (its channel named): the hooks in once torch is imported."""
    wire = _load("wire")
    if not os.environ.get(wire.CHANNEL_ENV):
        return
    _register(wire)
    imports = _load("imports")  # (the hooks' import watch too)
    if "torch" in sys.modules:  # imported already (a sitecustomize before this one did)
        _install()
    else:  # the hooks go in right after torch has finished importing
        sys.meta_path.insert(0, imports.ImportWatch({"torch"}, _install, once=True))


def _ran_already() -> bool:
    """Whether this file has run in this process already: a ``sitecustomize`` it shadows that runs
    every other one on the path, itself aside (as many do), runs this file again as a new module."""
    first = sys.modules.get("sitecustomize")
    return (
        first is not None
        and vars(first) is not globals()
        and os.path.abspath(getattr(first, "__file__", None) or "") == os.path.abspath(__file__)
    )


if not _ran_already():
    _chain()
    _start()
