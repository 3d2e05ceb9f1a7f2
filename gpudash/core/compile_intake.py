"""A compiled job's compiles and graph breaks, as its hooks send them (``gpudash_boot/compile_watch.py``),
turned into the run's events: each recompile (``RECOMPILE``) with its function, line, reason in
words and seconds; a function refused at the recompile limit (``RECOMPILE_LIMIT``, an error: it
runs eagerly from then on); each graph break's line, once (``GRAPH_BREAK``); a first compile
(``COMPILED``, not said on stderr). The first ``SAID`` recompiles are said on record's stderr, the
next one says that the rest are counted in the CSV and run.json, the others are quiet — but for a
recompile of a cause not said before: each cause is said at least once. Torch-free.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from gpudash.core.compile_note import CompileNote
from gpudash.core.compile_reasons import MODE, Break, Reason, graph_break, recompile_reason
from gpudash.core.compile_table import COMPILED, GRAPH_BREAK, RECOMPILE, RECOMPILE_LIMIT, CompileTable
from gpudash.core.events import Event, EventKind
from gpudash.core.lenient import float_or, int_or

SAID = 5  # recompiles said one line each on stderr; then one line that the rest are counted
RESUMED = re.compile(r"^torch_dynamo_resume_in_(?P<fn>\w+?)_at_(?P<line>\d+)$")
TORCH_OWN = re.compile(r"[/\\]torch[/\\]_dynamo[/\\]")  # a frame of dynamo's own (``external_utils.inner``)
LIMIT_WORDS = ("recompile limit", "cache_size_limit", "recompile_limit", "cache size limit")


def function_words(name: str | None, line: int | None) -> tuple[str, int | None]:
    """dynamo's name of a compiled frame in words: ``torch_dynamo_resume_in_forward_at_88`` (the rest
    of ``forward`` after a graph break) reads ``forward after line 88``."""
    m = RESUMED.match(name or "")
    if m is None:
        return name or "?", line
    inner, _ = function_words(m["fn"], None)
    return f"{inner} after line {m['line']}", line


class CompileIntake:
    """The lead rank's compile messages → events; what it has heard (frames' names, breaks seen)."""

    def __init__(self) -> None:
        self.frames: dict[str, tuple[str, str, int]] = {}  # frame id -> (function words, file, line)
        self.compiles: dict[str, int] = {}  # frame id -> compiles so far
        self.recompiled: dict[str, int] = {}  # frame id -> recompiles so far (a compile with a failed guard)
        self.recompiles = 0
        self.causes: set[str] = set()  # the recompiles' causes said so far (``Reason.key``)
        self.breaks: dict[tuple[str, int, str], int] = {}  # (file, line, words) -> times dynamo broke there
        self.table = CompileTable()  # what the events said, for a diagnosis
        self.called = False  # the job called torch.compile (its first compile may come before any step)

    def events(self, m: dict[str, Any], time_s: float) -> list[Event]:
        """The events of one message of the hooks (``wire.COMPILE``)."""
        step = int_or(m.get("step"))
        self.called = self.called or bool(m.get("called"))
        out = [e for c in m.get("compiles") or [] if isinstance(c, dict) for e in self._compile(c, step, time_s)]
        for raw in m.get("breaks") or []:
            said = graph_break(str(raw))
            key = (said.file, said.line, said.words)
            self.breaks[key] = count = self.breaks.get(key, 0) + 1
            out.append(_break_event(said, step, time_s, count))
        for e in out:
            self.table.on_event(e)
        return out

    def _compile(self, c: dict[str, Any], step: int, time_s: float) -> list[Event]:
        cid = str(c.get("id") or "")
        frame = cid.split("/", 1)[0]
        if c.get("fn"):
            fn, line = function_words(str(c["fn"]), int_or(c.get("line")))
            if TORCH_OWN.search(str(c.get("file") or "")):  # torch's wrapper of a compiled module
                fn = "the compiled module"
            self.frames[frame] = (fn, str(c.get("file") or ""), line or 0)
        fn, file, line = self.frames.get(frame, ("?", str(c.get("file") or ""), 0))
        seconds = round(float_or(c.get("s")), 3)
        note = CompileNote(fn, file, line, step, seconds, cid)
        fail = f"{c.get('fail') or ''} {c.get('fail_why') or ''}".lower()
        reason = _cause(c)
        if reason is not None:
            why = str(c["why"])[:300]
            note = replace(note, reason=reason.words, cause=reason.key, cause_kind=reason.kind, fix=reason.fix, raw=why)
        where = f"{fn} ({_short(file)}:{line})" if " after line " not in fn else f"{fn} of {_short(file)}"
        if TORCH_OWN.search(file):
            where = fn
        if c.get("backward"):  # a lazy backward's compile: its seconds are its compile's
            message = f"compiled the backward of {where} in {seconds:.2f} s"
            return [_event(time_s, COMPILED, message, replace(note, backward=True, quiet=True))]
        if any(w in fail for w in LIMIT_WORDS):
            message = f"{where} hit the recompile limit: it runs uncompiled (eager) from here on" + (
                f" — the last reason: {reason.words}; {reason.fix}" if reason else ""
            )
            return [_event(time_s, RECOMPILE_LIMIT, message, note, EventKind.ERROR)]
        self.compiles[frame] = self.compiles.get(frame, 0) + 1
        if self.compiles[frame] == 1 or reason is None:
            return [_event(time_s, COMPILED, f"compiled {where} in {seconds:.2f} s", replace(note, quiet=True))]
        self.recompiles += 1
        self.recompiled[frame] = n = self.recompiled.get(frame, 0) + 1
        message = f"recompile {n} of {where}: {reason.words}, {seconds:.2f} s — {reason.fix}"
        new_cause = reason.key not in self.causes
        self.causes.add(reason.key)
        if self.recompiles == SAID + 1:
            message += " (further recompiles of a cause said before are not said here: the CSV's events and run.json"
            message += " count them)"
        quiet = self.recompiles > SAID + 1 and not new_cause  # each cause is said at least once
        return [_event(time_s, RECOMPILE, message, replace(note, count=n, quiet=quiet))]


def _event(time_s: float, what: str, message: str, note: CompileNote, kind: EventKind = EventKind.MEASURED) -> Event:
    return Event(time_s, kind, what=what, message=message, data=note)


def _cause(c: dict[str, Any]) -> Reason | None:
    """A recompile's cause: the failed guard of the cache entry that differs only in it — the first
    failure that is not a global state (grad mode, autocast: checked first, so an entry of the other
    mode fails there, whatever else differs) — else dynamo's own reason (its newest entry's)."""
    whys = [recompile_reason(str(w)) for w in c.get("whys") or [] if w]
    own = recompile_reason(str(c["why"])) if c.get("why") else None
    found = [r for r in ([own] if own else []) + whys if r.kind != MODE]
    return found[0] if found else own or (whys[0] if whys else None)


def _break_event(said: Break, step: int, time_s: float, count: int) -> Event:
    """A graph break: said the first time at its line; again (traced again, at a recompile) counted quietly."""
    note = CompileNote(
        file=said.file, line=said.line, step=step, reason=said.words, cause_kind=said.kind, fix=said.fix, count=count
    )
    message = f"graph break at {said.where}: {said.words} — {said.fix}"
    return _event(time_s, GRAPH_BREAK, message, replace(note, quiet=count > 1))


def _short(file: str) -> str:
    return file.rsplit("/", 1)[-1] if file else "?"
