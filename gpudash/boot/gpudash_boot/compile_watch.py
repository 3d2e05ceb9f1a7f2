"""What dynamo did in a compiled job (``torch.compile``), read from what torch keeps in the process
and sent to gpudash as it happens (for ``hooks.py``; gpudash's own engine reads its own compiles with it too).

- **Each compile** (a first compile, a recompile, one refused at the recompile limit): dynamo's
  own record of it (``torch._dynamo.utils.get_compilation_metrics()``, a bounded list of
  ``CompilationMetrics``): its id (``"frame/attempt"``), the function and its file and first line,
  the seconds it took, the guard that failed (``recompile_reason``: against its newest cache entry)
  and each entry's failed guard (``torch._dynamo.utils.guard_failures``, one per entry of the
  function's cache at that compile), and a failure's type and reason (the recompile limit).
- **Each graph break**: its file, line and reason, from dynamo's own ``graph_breaks`` messages
  (tracing's, a frame skipped, an error's), taken by a logging handler of gpudash's on those
  loggers — turned to DEBUG with nothing passed on to torch's handlers, so nothing reaches the job's
  output; where the job asked for those messages itself (``TORCH_LOGS=graph_breaks``) its own
  handlers go on as they were.
- A lazily compiled backward is a record of its own (the same compile id): its seconds are its
  compile's. Messages are cut to a dozen compiles and breaks each, far under a datagram's 64 KiB.

The one private name read: ``torch._dynamo.utils._compilation_metrics``, the list behind the public
``get_compilation_metrics()``, for its newest record alone: a compile refused at the recompile limit
calls no callback, and torch says little of it (pytorch/pytorch#135458); the record is how it shows.

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

from . import wire

BREAKS_LOGGERS = tuple(  # torch._logging's artifact loggers of graph breaks: tracing, a skipped frame, an error
    f"torch._dynamo.{module}.__graph_breaks" for module in ("symbolic_convert", "convert_frame", "exc")
)
TEXT_CHARS = 1200  # of a graph break's message, sent
WHY_CHARS = 300  # of a recompile's reason, sent
WHYS = 8  # each cache entry's failed guard, the first this many (gpudash needs the first of another state)
MAX_TAKEN = 240  # graph-break messages kept between two reads
PER_MESSAGE = 12  # compiles, and graph breaks, a datagram (a message stays far under 64 KiB)
FIELDS = ("co_name", "co_filename", "co_firstlineno", "fail_type")


class BreakHandler(logging.Handler):
    """Keeps dynamo's graph-break messages for the next read (``taken``)."""

    def __init__(self, noted: Callable[[], None]) -> None:
        super().__init__(logging.DEBUG)
        self.taken: list[str] = []
        self.noted = noted

    def emit(self, record: logging.LogRecord) -> None:
        try:
            if len(self.taken) < MAX_TAKEN:  # (a job that breaks graphs and never steps: kept bounded)
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
        self.seen: set[tuple[Any, ...]] = set()  # the compile records sent (id, forward or backward, start)
        self.failures: dict[Any, int] = {}  # guard_failures: each code's reasons read so far
        self.handler = BreakHandler(self.note)
        self._logger_state: dict[str, tuple[int, bool]] = {}  # each breaks logger's level and propagate, to restore
        self._callbacks: Any = None  # dynamo's callback handler, where the end callback went
        self.every_step = False  # no callbacks to say a compile ended: read at every step
        self.newest: Any = None  # dynamo's newest compile record at the last read
        self.earlier: set[int] = set()  # the records dynamo kept before the watch began, not its own

    def skip_earlier(self) -> None:
        """What dynamo compiled before now is not this watch's (a step loop run in a process that
        compiled before it: a benchmark's, a test's)."""
        utils = sys.modules.get("torch._dynamo.utils")
        self.earlier = {id(m) for m in _metrics(utils)} if utils is not None else set()
        for code, reasons in list(getattr(utils, "guard_failures", {}).items()):
            self.failures[code] = len(reasons)

    def note(self, *_: Any) -> None:
        self.changed = True

    def install(self) -> None:
        """Once dynamo is loaded: each compile's end heard (dynamo's callbacks; a torch without them:
        read at every step), the graph breaks' logger heard, and what compiled before now read next."""
        if self.installed:
            return
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

    def compile_called(self) -> None:
        """The job called ``torch.compile``: said to gpudash once (its first compile comes before its
        first step, and may take minutes), and the watch installed."""
        if not self.called:
            self.called = True
            self.send({"k": wire.COMPILE, "rank": self.rank(), "step": 0, "compiles": [], "breaks": [], "called": 1})
        self.install()

    def _hear_breaks(self) -> None:
        """gpudash's handler on each graph-break logger, each enabled for DEBUG with nothing passed on
        to torch's handlers — again after ``torch._logging.set_logs()`` reset them — unless the job
        asked for them itself (``TORCH_LOGS=graph_breaks``): then its handlers go on as they were."""
        for name in BREAKS_LOGGERS:
            logger = logging.getLogger(name)
            if not logger.isEnabledFor(logging.DEBUG):  # not asked for by the job: heard by gpudash alone
                self._logger_state.setdefault(name, (logger.level, logger.propagate))
                logger.setLevel(logging.DEBUG)
                logger.propagate = False
            if self.handler not in logger.handlers:
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
        self._hear_breaks()
        failures = self._new_failures(utils)
        compiles = [c for m in _metrics(utils) if (c := self._compile(m, failures)) is not None]
        breaks, self.handler.taken = self.handler.taken, []
        for i in range(0, max(len(compiles), len(breaks)), PER_MESSAGE):  # each datagram far under 64 KiB
            part = {"compiles": compiles[i : i + PER_MESSAGE], "breaks": breaks[i : i + PER_MESSAGE]}
            self.send({"k": wire.COMPILE, "rank": self.rank(), "step": step, **part})

    def _new_failures(self, utils: Any) -> dict[tuple[Any, ...], list[str]]:
        """Each function's guard failures since the last read (``guard_failures``: at a recompile, one
        for each entry of its cache, in order), by (name, file, first line)."""
        out: dict[tuple[Any, ...], list[str]] = {}
        for code, reasons in list(getattr(utils, "guard_failures", {}).items()):
            seen = self.failures.get(code, 0)
            if len(reasons) < seen:  # torch._dynamo.reset() emptied them
                seen = 0
            if len(reasons) > seen:
                self.failures[code] = len(reasons)
                key = (code.co_name, code.co_filename, code.co_firstlineno)
                out.setdefault(key, []).extend(str(r)[:TEXT_CHARS] for r in reasons[seen:])
        return out

    def _compile(self, m: Any, failures: dict[tuple[Any, ...], list[str]]) -> dict[str, Any] | None:
        if id(m) in self.earlier:
            return None
        cid = str(getattr(m, "compile_id", None) or f"#{id(m)}")
        backward = getattr(m, "is_forward", None) is False  # a lazy backward's compile: the same id's
        key = (cid, backward, getattr(m, "start_time_us", None) or getattr(m, "start_time", None))
        if key in self.seen:  # (torch._dynamo.reset() starts the ids again: the start time tells them apart)
            return None
        self.seen.add(key)
        name, file, line, fail = (getattr(m, f, None) for f in FIELDS)
        seconds = getattr(m, "entire_frame_compile_time_s", None)
        if seconds is None and getattr(m, "duration_us", None) is not None:
            seconds = m.duration_us / 1e6
        queue = failures.get((name, file, line), [])
        entries = 0
        if getattr(m, "cache_size", None):  # a recompile: a failure for each entry dynamo checked
            entries = getattr(m, "accumulated_cache_size", None) or m.cache_size
        whys, queue[:] = queue[:entries], queue[entries:]
        reason = getattr(m, "recompile_reason", None) or (whys[0] if whys else None)
        return {
            "id": cid,
            "fn": name,
            "file": file,
            "line": line,
            "s": seconds,
            "backward": backward,
            "why": (reason or "")[:WHY_CHARS],
            "whys": [w[:WHY_CHARS] for w in whys[:WHYS]],  # the cache entries' failures (dynamo's: the newest's)
            "fail": fail,
            "fail_why": (getattr(m, "fail_reason", None) or "")[:WHY_CHARS],
        }

    def uninstall(self) -> None:
        self.installed = False
        for name in ("remove_start_callback", "remove_end_callback"):
            try:
                getattr(self._callbacks, name)(self.note)
            except Exception:  # noqa: BLE001, S110 - already gone, or no such method
                pass
        for name in BREAKS_LOGGERS:
            logger = logging.getLogger(name)
            if self.handler in logger.handlers:
                logger.removeHandler(self.handler)
            if name in self._logger_state:
                logger.setLevel(self._logger_state[name][0])
                logger.propagate = self._logger_state[name][1]
        self._logger_state.clear()


def _metrics(utils: Any) -> list[Any]:
    read = getattr(utils, "get_compilation_metrics", None)
    if read is None:
        return []
    kept = read()
    if isinstance(kept, dict):  # an early torch's: each code's list
        return [m for each in kept.values() for m in (each if isinstance(each, list) else [each])]
    return list(kept)
