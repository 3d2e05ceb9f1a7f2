"""A compiled job's compile table, built from the run's compile events (live, or read back from a
CSV): each compiled function with its compiles, recompiles and seconds, each recompile's reason,
each graph break's line and reason with how often dynamo broke there, a function refused at the
recompile limit. run.json's ``compile``, the dashboard's compile table, ``report`` and ``diagnose``
read it. Torch-free.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from gpudash.core.compile_note import CompileNote
from gpudash.core.events import Event

COMPILED = "compiled"  # a function's first compile (``what`` of a measured event)
RECOMPILE = "recompile"  # a function compiled again: a guard failed (its reason in its ``CompileNote``)
RECOMPILE_LIMIT = "recompile_limit"  # an error event: the function runs eagerly from here on
GRAPH_BREAK = "graph_break"  # dynamo broke a graph at a line
COMPILE_WHATS = frozenset({COMPILED, RECOMPILE, RECOMPILE_LIMIT, GRAPH_BREAK})
COMPILE_SUMMARY = "compiles"  # a measured event at the job's end: the table in one line (not counted again)


@dataclass
class FunctionRow:
    """One compiled function (a frame dynamo compiled: the rest of a function after a graph break is
    its own): where, its compiles and seconds, the recompiles' reasons by count, the limit."""

    name: str
    file: str
    line: int
    compiles: int = 0
    seconds: float = 0.0
    reasons: dict[str, int] = field(default_factory=dict)  # cause (the reason less its values) -> recompiles
    fixes: dict[str, str] = field(default_factory=dict)  # cause -> its fix
    kinds: dict[str, str] = field(default_factory=dict)  # cause -> what it is about
    latest: dict[str, str] = field(default_factory=dict)  # cause -> its latest reason, with its values
    limit: bool = False
    limit_at: tuple[float, int] | None = None  # when it hit the recompile limit: (the run's seconds, the job's step)

    @property
    def recompiles(self) -> int:
        return sum(self.reasons.values())

    @property
    def where(self) -> str:
        return f"{self.file.rsplit('/', 1)[-1]}:{self.line}" if self.file else "?"


@dataclass
class BreakRow:
    file: str
    line: int
    reason: str
    fix: str
    count: int = 1

    @property
    def where(self) -> str:
        return f"{self.file.rsplit('/', 1)[-1]}:{self.line}" if self.file else "?"


@dataclass(frozen=True)
class Recompile:
    """One recompile: when (the run's seconds, the job's step), what, why, how long."""

    time_s: float
    step: int
    id: str  # dynamo's compile id ("frame/attempt")
    function: str
    where: str
    reason: str
    cause: str  # the reason less its values: recompiles of one cause
    kind: str
    seconds: float


class CompileTable:
    """Fed the run's events (``on_event``); says what was compiled, recompiled and broken."""

    def __init__(self) -> None:
        self.functions: dict[tuple[str, str, int], FunctionRow] = {}
        self.breaks: dict[tuple[str, int, str], BreakRow] = {}
        self.recompiles: list[Recompile] = []
        self.by_step: list[tuple[int, float]] = []  # every compile's (step read at, seconds)

    def __bool__(self) -> bool:
        return bool(self.functions or self.breaks)

    def on_event(self, e: Event) -> bool:
        """Take a compile event (True: it was one)."""
        n = e.data
        if e.what not in COMPILE_WHATS or not isinstance(n, CompileNote):
            return False
        if e.what == GRAPH_BREAK:
            at = (n.file, n.line, n.reason)
            row = self.breaks.setdefault(at, BreakRow(*at, n.fix, 0))
            row.count = max(row.count + 1, n.count)
            return True
        fn = self.functions.setdefault((n.fn, n.file, n.line), FunctionRow(n.fn, n.file, n.line))
        if e.what == RECOMPILE_LIMIT:
            fn.limit = True
            fn.limit_at = fn.limit_at or (e.time_s, n.step)
            return True
        fn.seconds += n.seconds
        self.by_step.append((n.step, n.seconds))
        if n.backward:  # its compile's seconds, not a compile of its own
            self._backward(n.id, n.seconds)
            return True
        fn.compiles += 1
        if e.what == RECOMPILE:
            reason = n.reason or "?"
            cause = n.cause or reason
            fn.reasons[cause] = fn.reasons.get(cause, 0) + 1
            fn.fixes[cause], fn.kinds[cause], fn.latest[cause] = n.fix, n.cause_kind, reason
            self.recompiles.append(
                Recompile(e.time_s, n.step, n.id, fn.name, fn.where, reason, cause, n.cause_kind, n.seconds)
            )
        return True

    def _backward(self, cid: str, seconds: float) -> None:
        """A lazy backward's seconds, added to its recompile (the same compile id), if it was one."""
        for i in range(len(self.recompiles) - 1, -1, -1):
            if self.recompiles[i].id == cid:
                self.recompiles[i] = replace(self.recompiles[i], seconds=self.recompiles[i].seconds + seconds)
                return

    @property
    def seconds(self) -> float:
        return sum(f.seconds for f in self.functions.values())

    def in_training(self) -> list[Recompile]:
        """The recompiles after the first step: those the training paid for."""
        return [r for r in self.recompiles if r.step > 1]

    def seconds_until(self, step: int) -> float:
        """The seconds of the compiles read by the end of ``step`` (1: those before the first step's end)."""
        return sum(seconds for at, seconds in self.by_step if at <= step)

    def as_dict(self) -> dict[str, Any]:
        """run.json's ``compile``."""
        return {
            "seconds": round(self.seconds, 3),
            "graphs": self.graphs(),
            "functions": [
                {
                    "function": f.name,
                    "where": f"{f.file}:{f.line}",
                    "compiles": f.compiles,
                    "recompiles": f.recompiles,
                    "seconds": round(f.seconds, 3),
                    "reasons": [
                        {"cause": r, "count": n, "latest": f.latest.get(r, ""), "fix": f.fixes.get(r, "")}
                        for r, n in f.reasons.items()
                    ],
                    "recompile_limit_hit": f.limit,
                }
                for f in self.functions.values()
            ],
            "recompiles": [
                {
                    "time_s": round(r.time_s, 3),
                    "step": r.step,
                    "function": r.function,
                    "where": r.where,
                    "reason": r.reason,
                    "seconds": round(r.seconds, 3),
                }
                for r in self.recompiles[-200:]
            ],
            "graph_breaks": [
                {"where": f"{b.file}:{b.line}", "reason": b.reason, "count": b.count, "fix": b.fix}
                for b in self.breaks.values()
            ],
        }

    def graphs(self) -> dict[str, int]:
        """Each compiled function's graphs a call runs as: its frames compiled (the function, and its
        rest after each graph break, ``forward after line 33``), by "function (file:line)"."""
        out: dict[str, int] = {}
        firsts = {f.name: f.where for f in self.functions.values() if " after line " not in f.name}
        for f in self.functions.values():
            base = f.name.split(" after line ", 1)[0]
            key = f"{base} ({firsts.get(base, f.where)})"
            out[key] = out.get(key, 0) + 1
        return out

    def summary(self) -> str:
        """The table in one line: "compiles: 2 functions compiled 11× in 1.65 s; 9 recompiles (…); …"."""
        fns = self.functions.values()
        said = f"compiles: {len(fns)} function{'s' * (len(fns) != 1)} compiled {sum(f.compiles for f in fns)}×"
        said += f" in {self.seconds:.2f} s"
        causes: dict[str, int] = {}
        for f in fns:
            for cause, n in f.reasons.items():
                causes[cause] = causes.get(cause, 0) + n
        if causes:
            top = ", ".join(f"{c} ×{n}" for c, n in sorted(causes.items(), key=lambda kv: -kv[1])[:3])
            n = len(self.recompiles)
            said += f"; {n} recompile{'s' * (n != 1)} ({top})"
        split = [f"{name} runs as {n} graphs" for name, n in self.graphs().items() if n > 1]
        if split:
            said += f"; {', '.join(split)}"
        if self.breaks:
            said += f"; {len(self.breaks)} graph break{'s' * (len(self.breaks) != 1)} ("
            said += ", ".join(f"{b.where} {b.reason}" for b in list(self.breaks.values())[:3]) + ")"
        limited = [f"{f.name} at {f.where}" for f in fns if f.limit]
        if limited:
            said += f"; hit the recompile limit, running uncompiled: {', '.join(limited)}"
        return said

    def lines(self) -> list[str]:
        """The table in a few lines (``report``, the end of ``record``)."""
        out = []
        for f in self.functions.values():
            reasons = "; ".join(f"{r} ×{n}" for r, n in sorted(f.reasons.items(), key=lambda kv: -kv[1]))
            limit = " — hit the recompile limit: runs uncompiled from then on" if f.limit else ""
            again = f", {f.recompiles} recompile{'s' * (f.recompiles != 1)} ({reasons})" if f.recompiles else ""
            out.append(f"{f.name} at {f.where}: compiled {f.compiles}× in {f.seconds:.2f} s{again}{limit}")
        for b in self.breaks.values():
            out.append(f"graph break at {b.where}: {b.reason} (×{b.count}) — {b.fix}")
        return out
