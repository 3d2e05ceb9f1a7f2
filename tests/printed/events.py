"""``record``'s event lines read back (``tests.printed``): an event by its kind, a job's goodput
account, a recording's last line, and a data-parallel run's straggler verdicts."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpudash.recording.headless_report import ROW_NAMES
from tests.printed.figures import NUMBER, number


# -- record's lines: events and the last one ------------------------------------------------------------
@dataclass(frozen=True)
class EventLine:
    """``[  12.3s] measured: goodput 50.0% of 20.0 s: …``: an event as ``record`` prints it."""

    time_s: float
    kind: str  # "measured", "changed", "phase", "stalled"…
    text: str  # the rest after "kind: " (or after "kind " for a change: "what: before → after")


_EVENT = re.compile(r"\[ *(?P<t>[\d.]+)s\] (?P<kind>[a-z_]+)(?:(?:: | )(?P<text>.*))?")


def _record_line(pattern: re.Pattern[str], line: str) -> re.Match[str] | None:
    """``pattern`` over the whole of a line ``record`` prints, with or without its ``gpudash: ``
    prefix (None: not such a line)."""
    return pattern.fullmatch(line.strip().removeprefix("gpudash: "))


def event_line(line: str) -> EventLine | None:
    m = _record_line(_EVENT, line)
    if m is None:
        return None
    return EventLine(float(m["t"]), m["kind"], m["text"] or "")


def event_lines(text: str, kind: str | None = None) -> list[EventLine]:
    """Every event line in ``text`` (of ``kind``, when given), in order."""
    return [e for line in text.splitlines() if (e := event_line(line)) is not None and kind in (None, e.kind)]


@dataclass(frozen=True)
class Goodput:
    """``goodput 62.1% of 58.3 s: training 36.2 s · evaluation 9.8 s · …`` (a job's phases,
    ``job.wall_time.phases_line``): the share of wall time spent training and each phase's seconds."""

    pct: float | None  # None: "goodput –"
    wall_s: float
    phases: dict[str, float]


_GOODPUT = re.compile(rf"goodput (?:(?P<pct>{NUMBER})%|–) of (?P<wall>{NUMBER}) s: (?P<parts>.+)$")
_PHASE = re.compile(rf"(?P<phase>.+) (?P<s>{NUMBER}) s")


def goodput(text: str) -> Goodput | None:
    """The goodput account in ``text`` (an event's text, a line of stderr); None: none."""
    m = _GOODPUT.search(text.strip())
    if m is None:
        return None
    parts = [_PHASE.fullmatch(part) for part in m["parts"].split(" · ")]
    phases = {p["phase"]: number(p["s"]) for p in parts if p is not None}
    return Goodput(None if m["pct"] is None else number(m["pct"]), number(m["wall"]), phases)


def goodputs(text: str) -> list[Goodput]:
    """Every goodput account in ``text``, one a line."""
    return [g for line in text.splitlines() if (g := goodput(line)) is not None]


@dataclass(frozen=True)
class Done:
    """A recording's last line: ``gpudash: done: 131 rows in run.csv (122 throughput windows, 8
    events, 1 summary)`` (its status ``done``, ``interrupted by SIGINT``, ``the job exited with code
    7``…): its rows in all, where, and how many of each kind (``samples``: the throughput windows,
    the CSV's ``sample`` rows)."""

    status: str
    samples: int
    rows: int
    path: str | None  # None: written to stdout
    kinds: dict[str, int] = field(default_factory=dict, compare=False)  # the CSV's row_kind -> rows of it


# what the line calls each row_kind's rows, one and several: gpudash's own words, read backwards
ROW_WORDS = {word: kind for kind, words in ROW_NAMES.items() for word in words}
_DONE = re.compile(r"(?P<status>.+): (?P<rows>\d+) rows(?: in (?P<path>.+?))? \((?P<held>[^()]*)\)")
_HELD = re.compile(r"(\d+) ([^,]+)")


def done_line(line: str) -> Done | None:
    m = _record_line(_DONE, line)
    if m is None:
        return None
    kinds: dict[str, int] = {}
    for count, words in _HELD.findall(m["held"]):
        words = words.strip()
        kind = ROW_WORDS.get(words)
        if kind is not None:
            kinds[kind] = kinds.get(kind, 0) + int(count)
    return Done(m["status"], kinds.get("sample", 0), int(m["rows"]), m["path"], kinds)


def last_done(text: str) -> Done | None:
    """The last ``Done`` line of ``text`` (a recording's stderr)."""
    found = [d for line in text.splitlines() if (d := done_line(line)) is not None]
    return found[-1] if found else None


# -- a data-parallel run's straggler ------------------------------------------------------------------
_NAMED = re.compile(r"(?<![\w])straggler: rank (\d+)")
_NONE_NAMED = re.compile(r"(?<![\w])no straggler(?: \(|(?: named)?: )")


def stragglers(text: str) -> list[int]:
    """The ranks the run's verdicts name ("straggler: rank 3 — its own work …"), in order."""
    return [int(rank) for rank in _NAMED.findall(text)]


def no_straggler(text: str) -> bool:
    """A verdict says no rank is the straggler ("no straggler (ranks' own work within 3%)", or
    "no straggler named: …, in the noise")."""
    return _NONE_NAMED.search(text) is not None
