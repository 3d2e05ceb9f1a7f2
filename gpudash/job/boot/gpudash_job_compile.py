"""What dynamo did in a compiled job (``torch.compile``), read from what torch keeps in the process
and sent to gpudash as it happens (``gpudash_job_hooks.py`` loads this file from the same folder).

- **Each compile** (a first compile, a recompile, one refused at the recompile limit): dynamo's
  own record of it (``torch._dynamo.utils.get_compilation_metrics()``, a bounded list of
  ``CompilationMetrics``): its id (``"frame/attempt"``), the function and its file and first line,
  the seconds it took, the guard that failed (``recompile_reason``: against its newest cache entry)
  and each entry's failed guard (``torch._dynamo.utils.guard_failures``, one per entry of the
  function's cache at that compile), and a failure's type and reason (the recompile limit).
- **Each graph break**: its file, line and reason, from dynamo's own ``graph_breaks`` message,
  taken by a logging handler of gpudash's on that logger — turned to DEBUG with nothing passed on
  to torch's handlers, so nothing reaches the job's output; where the job asked for those messages
  itself (``TORCH_LOGS=graph_breaks``) its own handlers go on as they were.

Read at the step boundary after dynamo compiled (its start and end callbacks, or a graph break, set a flag;
a compile refused at the recompile limit calls none: its record is dynamo's newest): a step that did not
compile costs a flag's test and a look at the newest record. The raw texts go as they are; gpudash reads
them (``gpudash.core.compile_reasons``), in one place for every torch version. Standard library and
the job's torch only.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from typing import Any

import gpudash_job_wire as wire  # type: ignore[import-not-found]  # beside this file

BREAKS_LOGGER = "torch._dynamo.symbolic_convert.__graph_breaks"  # torch._logging's artifact logger
TEXT_CHARS = 1200  # of a reason or a graph break's message, sent
FIELDS = ("co_name", "co_filename", "co_firstlineno", "fail_type")


class BreakHandler(logging.Handler):
    """Keeps dynamo's graph-break messages for the next read (``taken``)."""

    def __init__(self, noted: Callable[[], None]) -> None:
        super().__init__(logging.DEBUG)
        self.taken: list[str] = []
        self.noted = noted

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.taken.append(record.getMessage()[:TEXT_CHARS])
            self.noted()
        except Exception:  # noqa: BLE001, S110 - a message lost, never the job's compile
            pass


class CompileWatch:
    """Dynamo's compiles and graph breaks, sent over ``send`` at the step boundary after they came."""

    def __init__(self, send: Callable[[dict[str, Any]], None], rank: Callable[[], int]) -> None:
        self.send = send
        self.rank = rank
        self.installed = False
        self.called = False  # the job's torch.compile said to gpudash
        self.changed = False  # dynamo compiled (or broke a graph) since the last read
        self.seen: set[str] = set()  # compile ids sent
        self.failures: dict[Any, int] = {}  # guard_failures: each code's reasons read so far
        self.handler = BreakHandler(self.note)
        self._logger_state: tuple[int, bool] | None = None  # the breaks logger's level and propagate, to restore
        self._callbacks: Any = None  # dynamo's callback handler, where the end callback went
        self.every_step = False  # no callbacks to say a compile ended: read at every step
        self.newest: Any = None  # dynamo's newest compile record at the last read

    def note(self, *_: Any) -> None:
        self.changed = True

    def install(self) -> None:
        """Once dynamo is loaded: each compile's end heard (dynamo's callbacks; a torch without them:
        read at every step), the graph breaks' logger heard, and what compiled before now read next."""
        if self.installed:
            return
        if not self.called:  # said once: the first compile comes before the first step, and may take minutes
            self.called = True
            self.send({"k": wire.COMPILE, "rank": self.rank(), "step": 0, "compiles": [], "breaks": [], "called": 1})
        self.installed = True
        self.changed = True
        handler = getattr(sys.modules.get("torch._dynamo.callback"), "callback_handler", None)
        if handler is not None and hasattr(handler, "register_start_callback"):
            handler.register_start_callback(self.note)  # (a compile that fails, at the recompile limit, has no end)
            handler.register_end_callback(self.note)
            self._callbacks = handler
        else:
            self.every_step = True
        self._hear_breaks()

    def _hear_breaks(self) -> None:
        logger = logging.getLogger(BREAKS_LOGGER)
        if self.handler in logger.handlers:
            return
        if not logger.isEnabledFor(logging.DEBUG):  # not asked for by the job: heard by gpudash alone
            self._logger_state = (logger.level, logger.propagate)
            logger.setLevel(logging.DEBUG)
            logger.propagate = False
        logger.addHandler(self.handler)

    def at_step(self, step: int) -> None:
        """At a step boundary: what dynamo did since the last, if it did anything."""
        if self.changed or self.every_step or (self.installed and self._newest() is not self.newest):
            self.changed = False
            self.read(step)

    def _newest(self) -> Any:
        """dynamo's newest compile record (a compile refused at the recompile limit calls no callback)."""
        kept = getattr(sys.modules.get("torch._dynamo.utils"), "_compilation_metrics", None)
        try:
            return kept[-1] if kept else None
        except (TypeError, IndexError, KeyError):
            return None

    def read(self, step: int) -> None:
        utils = sys.modules.get("torch._dynamo.utils")
        if utils is None:
            return
        self.newest = self._newest()
        self._hear_breaks()  # torch._logging.set_logs() clears its loggers' handlers
        failures = self._new_failures(utils)
        compiles = [c for m in _metrics(utils) if (c := self._compile(m, failures)) is not None]
        breaks, self.handler.taken = self.handler.taken, []
        if compiles or breaks:
            self.send({"k": wire.COMPILE, "rank": self.rank(), "step": step, "compiles": compiles, "breaks": breaks})

    def _new_failures(self, utils: Any) -> dict[tuple[Any, ...], list[str]]:
        """Each function's guard failures since the last read (``guard_failures``: at a recompile, one
        for each entry of its cache, in order), by (name, file, first line)."""
        out: dict[tuple[Any, ...], list[str]] = {}
        for code, reasons in list(getattr(utils, "guard_failures", {}).items()):
            seen = self.failures.get(code, 0)
            if len(reasons) > seen:
                self.failures[code] = len(reasons)
                key = (code.co_name, code.co_filename, code.co_firstlineno)
                out.setdefault(key, []).extend(str(r)[:TEXT_CHARS] for r in reasons[seen:])
        return out

    def _compile(self, m: Any, failures: dict[tuple[Any, ...], list[str]]) -> dict[str, Any] | None:
        cid = str(getattr(m, "compile_id", None) or f"#{id(m)}")
        if cid in self.seen:
            return None
        self.seen.add(cid)
        name, file, line, fail = (getattr(m, f, None) for f in FIELDS)
        seconds = getattr(m, "entire_frame_compile_time_s", None)
        if seconds is None and getattr(m, "duration_us", None) is not None:
            seconds = m.duration_us / 1e6
        queue = failures.get((name, file, line), [])
        entries = getattr(m, "cache_size", None) or 0  # its cache's entries then: a failure each
        whys, queue[:] = queue[:entries], queue[entries:]
        reason = getattr(m, "recompile_reason", None) or (whys[-1] if whys else None)
        return {
            "id": cid,
            "fn": name,
            "file": file,
            "line": line,
            "s": seconds,
            "why": (reason or "")[:TEXT_CHARS],
            "whys": whys,  # every cache entry's failure (dynamo's reason is the newest entry's)
            "fail": fail,
            "fail_why": (getattr(m, "fail_reason", None) or "")[:TEXT_CHARS],
        }

    def uninstall(self) -> None:
        self.installed = False
        for name in ("remove_start_callback", "remove_end_callback"):
            try:
                getattr(self._callbacks, name)(self.note)
            except Exception:  # noqa: BLE001, S110 - already gone, or no such method
                pass
        logger = logging.getLogger(BREAKS_LOGGER)
        if self.handler in logger.handlers:
            logger.removeHandler(self.handler)
        if self._logger_state is not None:
            logger.setLevel(self._logger_state[0])
            logger.propagate = self._logger_state[1]


def _metrics(utils: Any) -> list[Any]:
    read = getattr(utils, "get_compilation_metrics", None)
    if read is None:
        return []
    kept = read()
    if isinstance(kept, dict):  # an early torch's: each code's list
        return [m for each in kept.values() for m in (each if isinstance(each, list) else [each])]
    return list(kept)
