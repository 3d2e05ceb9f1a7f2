"""The job's tracebacks as bare: gpudash's hooks wrap functions that sit in the job's call stack
(``torch.autograd.backward``, a ``DataLoader`` iterator's ``__next__``, ``Module.train``, the save
functions, …) and run callbacks inside it (the optimizer step's hooks, a dispatch mode), and an
exception that passes through them (a Ctrl-C's ``KeyboardInterrupt`` inside ``loss.backward()``)
would carry their frames. Here they leave none:

- ``hidden(wrapper)``: the function to put in place of a wrapper (or to register as a callback);
  an exception leaving it has every frame of gpudash's taken out of its traceback first, then goes
  on as it came (a bare ``raise``, which on Python 3.11 and later takes the traceback as changed);
- ``install_excepthooks()``: an uncaught exception (the main thread's, another thread's) has them
  taken out before the job's own hook (or Python's) prints it: the same lines as bare, and Python's
  exit status (an uncaught ``KeyboardInterrupt`` still ends the process by SIGINT). On Python 3.10 a
  bare ``raise`` keeps its frame's own line, so there this is what takes it out.

gpudash's frames are those of this package's modules, known by their module's name (``gpudash_boot.…``
in the job), and of the bootstrap beside it (``sitecustomize.py``); a job's own use of the gpudash
package (``gpudash.track()``) is the job's. Standard library only.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
from typing import Any

PACKAGE = __name__.rpartition(".")[0]  # this package, as the process imported it ("gpudash_boot" in a job)
BOOTSTRAP = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "sitecustomize.py")
MAX_CHAIN = 8  # exceptions of a chain (__context__, __cause__) looked at, at most


def ours(frame: Any) -> bool:
    """The frame runs gpudash's code inside the job: a module of this package's, or the bootstrap."""
    return str(frame.f_globals.get("__name__", "")).startswith(PACKAGE + ".") or frame.f_code.co_filename == BOOTSTRAP


def without_ours(tb: Any) -> Any:
    """The traceback ``tb`` with every entry of gpudash's frames spliced out; its new head (None:
    only gpudash's frames were in it)."""
    while tb is not None and ours(tb.tb_frame):
        tb = tb.tb_next
    entry = tb
    while entry is not None:
        after = entry.tb_next
        while after is not None and ours(after.tb_frame):
            after = after.tb_next
        if entry.tb_next is not after:
            entry.tb_next = after
        entry = after
    return tb


def hide(exc: BaseException | None) -> None:
    """gpudash's frames out of ``exc``'s traceback and of the exceptions it was raised from."""
    seen: list[BaseException] = []
    while exc is not None and len(seen) < MAX_CHAIN and all(exc is not e for e in seen):
        seen.append(exc)
        try:
            exc.__traceback__ = without_ours(exc.__traceback__)
        except Exception:  # noqa: BLE001, S110 - an exception that keeps its traceback: as it came
            pass
        exc = exc.__cause__ or exc.__context__


def hidden(wrapper: Any) -> Any:
    """``wrapper``, called as it was; an exception leaving it has gpudash's frames taken out (this
    function's own included). Its name, text and ``__wrapped__`` (the function it wraps, for
    ``inspect.signature``) are ``wrapper``'s."""

    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return wrapper(*args, **kwargs)
        except BaseException as exc:
            hide(exc)
            raise

    functools.update_wrapper(call, wrapper)
    call.__wrapped__ = getattr(wrapper, "__wrapped__", wrapper)  # type: ignore[attr-defined]
    return call


class _UncaughtHooks:
    """``sys.excepthook`` and ``threading.excepthook``: gpudash's frames out, then the one before."""

    def __init__(self) -> None:
        self.previous = sys.excepthook
        self.previous_thread = threading.excepthook

    def main(self, kind: Any, exc: BaseException, tb: Any) -> None:
        try:
            hide(exc)
            tb = without_ours(tb)
        except Exception:  # noqa: BLE001, S110 - the traceback as it came
            pass
        self.previous(kind, exc, tb)

    def thread(self, args: Any) -> None:
        try:
            if args.exc_value is not None:
                hide(args.exc_value)
                tb = without_ours(args.exc_traceback)
                args = threading.ExceptHookArgs((args.exc_type, args.exc_value, tb, args.thread))
        except Exception:  # noqa: BLE001, S110 - the traceback as it came
            pass
        self.previous_thread(args)


def install_excepthooks() -> None:
    """Uncaught exceptions printed without gpudash's frames (the hooks already there called after)."""
    hooks = _UncaughtHooks()
    sys.excepthook, threading.excepthook = hooks.main, hooks.thread
