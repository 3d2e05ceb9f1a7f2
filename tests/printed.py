"""The lines gpudash prints, read back by their parts, for the tests (issue 72: never red on a busy machine).

gpudash adds parts to its lines that depend on the machine: a ``noisy: …`` clause or a ``⚠ noisy``
mark when something else competed for the CPU, ``too short``/``too few`` where a loaded run got
fewer samples than an interval needs, ``(no CI)`` in place of an interval, thousands separators
(``1,234``) and ``k`` (``12.5k``) as a figure grows. A test that matches a whole line with one
pattern fails on any of them; these readers parse each shape into typed parts, accept every
optional part gpudash may add (and an unknown clause, kept in ``others``), and return ``None``
for a line that is not of the shape, so that a test asserts on what it means to check.

The shapes (their writers in gpudash):

- ``Figure``: ``502 ± 9``, ``40,800 ± 1,500``, ``48.2 (no CI)``, ``502``, ``–``
  (``core.textfmt.plain_pm``, ``stats.fmt.fmt_pm``);
- ``Summary``: a configuration's summary line (``stats.segments.Segment.summary``), also the
  event message of a CSV's summary row;
- ``Progress``: ``record``'s line every 10 s (``recording.headless.progress_line``);
- ``Compared``: a ratio with its interval and verdict, as a report's cells and sentences say it
  (``stats.fmt.fmt_ratio``, ``report.command.fmt_comparison``, ``stats.noise_tally.MARK``);
- ``Change``: the dashboard's change in percent (``stats.fmt.fmt_change``);
- ``Done``: a recording's last line (``recording.headless.HeadlessRecording.report``);
- ``EventLine``: an event as ``record`` prints it (``[  12.3s] measured: …``);
- ``SweepLine``: a sweep's line per configuration and per repeat (``sweep.report.summary_line``,
  ``sweep.run``'s ``describe``), and tune's per measurement (``tune.run``'s ``describe``);
- ``table_rows``: the cells of a Markdown table under a heading (report.md, sweep.md, tune.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MINUS = "\u2212"  # the typographic minus intervals print ("−2")
NOISY_MARK = "⚠ noisy"  # after a verdict measured while the machine was noisy
VERDICTS = ("faster", "slower", "within noise", "no change detected", "too short")
NUMBER = r"[+\-−]?[\d,]*\d(?:\.\d+)?k?"  # a number as gpudash prints it (a regular expression)


def number(text: str) -> float:
    """A number as gpudash prints it: ``1,234.5``, ``−2``, ``+8``, ``12.5k``."""
    text = text.strip().replace(",", "").replace(MINUS, "-")
    scale = 1000.0 if text.endswith("k") else 1.0
    return float(text.removesuffix("k")) * scale


# -- a figure: a mean and its interval ---------------------------------------------------------------
@dataclass(frozen=True)
class Figure:
    """A mean and the half-width of its 95% interval (None: no interval; ``mean`` None: "–")."""

    mean: float | None
    half_width: float | None = None

    @property
    def has_interval(self) -> bool:
        return self.half_width is not None

    @property
    def low(self) -> float | None:
        return None if self.mean is None or self.half_width is None else self.mean - self.half_width

    @property
    def high(self) -> float | None:
        return None if self.mean is None or self.half_width is None else self.mean + self.half_width

    def holds(self, value: float) -> bool:
        """``value`` is this figure as printed: within its interval, or its mean's last digit."""
        if self.mean is None:
            return False
        return abs(value - self.mean) <= (self.half_width if self.half_width is not None else 0.0)


FIGURE = rf"(?:{NUMBER}|–)(?: ± {NUMBER}| \(no CI\))?"  # a figure as gpudash prints it (a regular expression)
_FIGURE = re.compile(rf"(?P<mean>{NUMBER}|–)(?: ± (?P<half>{NUMBER})| \(no CI\))?")


def figure(text: str) -> Figure | None:
    """``502 ± 9``, ``40,800 ± 1,500``, ``48.2 (no CI)``, ``502``, ``–`` (None: not a figure)."""
    m = _FIGURE.fullmatch(text.strip())
    if m is None:
        return None
    mean = None if m["mean"] == "–" else number(m["mean"])
    return Figure(mean, None if m["half"] is None else number(m["half"]))


# -- a configuration's summary line -------------------------------------------------------------------
@dataclass(frozen=True)
class Summary:
    """``encdec/serial bs8: steps/s 231.4 ± 3.2 (95% CI, 120 samples after warm-up)``, or a job's
    ``job:train.py bs64: steps/s 502 ± 9 (95% CI over 380 steps; warm-up: the first 20)``, with
    whatever a loaded machine adds (``; noisy: 16% of samples (host load)``, too short, too few)."""

    label: str  # the configuration: "encdec/serial bs8", "job:train.py bs64"
    metric: str  # "steps/s"
    figure: Figure
    samples: int | None = None  # a workload's: the samples the figure is over
    steps: int | None = None  # a job's: the steps the figure is over
    warmup_steps: int | None = None  # a job's: the steps left out as warm-up
    too_short: bool = False  # too few samples or steps for an interval
    noisy: str = ""  # "noisy: 16% of samples (host load)" when the machine was; "" when quiet
    others: tuple[str, ...] = ()  # any clause not known here (tolerated, kept for a test to look at)


_SUMMARY = re.compile(
    rf"^(?:gpudash: )?(?P<label>.+?): (?P<metric>\S+) (?P<figure>(?:{NUMBER}|–)(?: ± {NUMBER})?) \((?P<clauses>.+)\)$"
)
_CLAUSES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("ci_samples", re.compile(r"95% CI, (\d+) samples after warm-up")),
    ("ci_steps", re.compile(r"95% CI over (\d+) steps")),
    ("short_samples", re.compile(r"too short for an interval, (\d+) samples")),
    ("short_steps", re.compile(r"over (\d+) steps, too few for an interval")),
    ("warmup", re.compile(r"warm-up: the first (\d+)")),
    ("none", re.compile(r"no samples after warm-up|no step after the warm-up")),
)


def summary(line: str) -> Summary | None:
    """A summary line (``gpudash: `` before it or not) by its parts; None: not a summary line."""
    m = _SUMMARY.match(line.strip())
    if m is None:
        return None
    parts: dict[str, int | bool | str] = {}
    noisy, others, known = "", [], False
    for clause in m["clauses"].split("; "):
        if clause.startswith("noisy: "):
            noisy = clause
            continue
        for name, pattern in _CLAUSES:
            if (c := pattern.fullmatch(clause)) is not None:
                known = True
                if c.groups():
                    parts[name] = int(c[1])
                break
        else:
            others.append(clause)
    if not known:
        return None
    samples = parts.get("ci_samples", parts.get("short_samples"))
    steps = parts.get("ci_steps", parts.get("short_steps"))
    shown = figure(m["figure"])
    assert shown is not None  # the pattern's figure is one
    return Summary(
        m["label"],
        m["metric"],
        shown,
        samples=None if samples is None else int(samples),
        steps=None if steps is None else int(steps),
        warmup_steps=None if "warmup" not in parts else int(parts["warmup"]),
        too_short="short_samples" in parts or "short_steps" in parts,
        noisy=noisy,
        others=tuple(others),
    )


def summaries(text: str) -> list[Summary]:
    """Every summary line in ``text`` (a command's stderr), in order."""
    return [s for line in text.splitlines() if (s := summary(line)) is not None]


# -- record's progress line -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Progress:
    """``231 steps/s now · encdec/serial bs8 229.1 ± 3.2 steps/s (95% CI, 36 samples) · 00:40
    elapsed of 01:00``, then `` · ⚠ noisy: host load: …`` when the machine is noisy."""

    now: float | None  # steps/s now (None: no sample yet)
    label: str | None  # the configuration (None: warming up before one is known)
    figure: Figure | None  # its mean since warm-up (None: still warming up)
    samples: int | None  # the samples its interval is over
    too_short: str  # what a figure without an interval lacks: "needs ≈ 12 s more"; "" otherwise
    elapsed_s: int
    duration_s: int | None  # the --duration it runs for (None: until stopped)
    noisy: str  # "host load: other processes kept 1.9 of 2 CPUs busy"; "" when quiet


_NOW = re.compile(rf"(?:(?P<now>{NUMBER}) steps/s now|no sample yet)")
_MEAN = re.compile(
    rf"(?:(?P<label>.+?) )?(?:warming up|(?P<figure>{NUMBER}(?: ± {NUMBER}| \(no CI\))?) steps/s "
    r"\((?:95% CI, (?P<samples>\d+) samples|too short: (?P<short>[^)]*(?:\([^)]*\))?[^)]*))\))"
)
_ELAPSED = re.compile(r"(?P<elapsed>[\d:]+) elapsed(?: of (?P<duration>[\d:]+))?")


def seconds(clock: str) -> int:
    """``01:40`` or ``1:02:03`` in seconds."""
    total = 0
    for part in clock.split(":"):
        total = 60 * total + int(part)
    return total


def progress(line: str) -> Progress | None:
    """A progress line (``gpudash: `` before it or not) by its parts; None: not one."""
    parts = line.strip().removeprefix("gpudash: ").split(" · ")
    if len(parts) < 3:
        return None
    now, mean, elapsed = _NOW.fullmatch(parts[0]), _MEAN.fullmatch(parts[1]), _ELAPSED.fullmatch(parts[2])
    extra = parts[3:]
    if now is None or mean is None or elapsed is None or (extra and not extra[0].startswith(NOISY_MARK + ": ")):
        return None
    return Progress(
        now=None if now["now"] is None else number(now["now"]),
        label=mean["label"],
        figure=None if mean["figure"] is None else figure(mean["figure"]),
        samples=None if mean["samples"] is None else int(mean["samples"]),
        too_short=mean["short"] or "",
        elapsed_s=seconds(elapsed["elapsed"]),
        duration_s=None if elapsed["duration"] is None else seconds(elapsed["duration"]),
        noisy=" · ".join(extra).removeprefix(NOISY_MARK + ": "),
    )


def progress_lines(text: str) -> list[Progress]:
    """Every progress line in ``text`` (a command's stderr), in order."""
    return [p for line in text.splitlines() if (p := progress(line)) is not None]


# -- ratios and verdicts ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Compared:
    """``1.07× [1.05–1.09] faster`` (a report's cell), ``1.08× (no CI)``, a sweep's ``1.00×`` of
    its baseline; its verdict when the text has one, and whether it was marked noisy."""

    ratio: float
    low: float | None  # the ratio's 95% interval (None: none)
    high: float | None
    verdict: str = ""  # one of VERDICTS; "" when the text has none
    metric: str = ""  # "samples/s" when the comparison is of samples/s (a batch size changed)
    noisy: bool = False  # marked "⚠ noisy": measured while the machine was noisy
    rest: str = ""  # what follows the verdict ("use --seconds ≥ 4", "(the base's)"…)

    @property
    def has_interval(self) -> bool:
        return self.low is not None and self.high is not None


_RATIO = re.compile(
    rf"(?:(?P<metric>\S+/s) )?(?P<ratio>{NUMBER})×(?: \[(?P<low>{NUMBER})–(?P<high>{NUMBER})\]| \(no CI\))?"
)


def without_noisy_mark(text: str) -> tuple[str, bool]:
    """``text`` without gpudash's noisy mark (`` ⚠ noisy`` or `` (⚠ noisy)`` at its end), and whether it had one."""
    text = text.strip()
    for mark in (f" ({NOISY_MARK})", f" {NOISY_MARK}"):
        if text.endswith(mark):
            return text.removesuffix(mark), True
    return text, text == NOISY_MARK


def verdict(text: str) -> tuple[str, str, bool]:
    """A verdict cell: (the verdict, what follows it, marked noisy); ("", text, …) when it has none."""
    text, noisy = without_noisy_mark(text)
    for v in VERDICTS:
        if text == v or text.startswith(v + " ") or text.startswith(v + ":"):
            return v, text.removeprefix(v).strip(" :"), noisy
    return "", text, noisy


def compared(text: str) -> Compared | None:
    """A ratio, its interval and verdict (a report's cell, or a ratio cell alone); None: not one."""
    text, noisy = without_noisy_mark(text)
    m = _RATIO.match(text)
    if m is None:
        return None
    said, rest, marked = verdict(text[m.end() :].removeprefix(","))
    return Compared(
        ratio=number(m["ratio"]),
        low=None if m["low"] is None else number(m["low"]),
        high=None if m["high"] is None else number(m["high"]),
        verdict=said,
        metric=m["metric"] or "",
        noisy=noisy or marked,
        rest=rest,
    )


@dataclass(frozen=True)
class Change:
    """The dashboard's change in percent: ``+8% (−2 … +19%)``; ``+8% (no CI)`` without an interval."""

    pct: float
    low: float | None
    high: float | None


_CHANGE = re.compile(rf"(?P<pct>{NUMBER})% \((?:(?P<low>{NUMBER}) … (?P<high>{NUMBER})%|no CI)\)")


def change(text: str) -> Change | None:
    m = _CHANGE.fullmatch(text.strip())
    if m is None:
        return None
    low, high = (None if m[k] is None else number(m[k]) for k in ("low", "high"))
    return Change(number(m["pct"]), low, high)


@dataclass(frozen=True)
class Versus:
    """``report a.csv b.csv``'s line per pair: ``encdec/pipelined bs8 (b.csv): 1.09× [1.07–1.11]
    encdec/serial bs8 (a.csv), faster`` (`` (⚠ noisy)`` after it when either side was)."""

    name: str
    run: str
    compared: Compared
    base: str
    base_run: str


_PAIR = re.compile(
    rf"^(?:gpudash: )?(?P<name>.+?) \((?P<run>[^()]+)\): (?P<ratio>{NUMBER}×(?: \[[^\]]*\]| \(no CI\))?) "
    r"(?P<base>.+?) \((?P<base_run>[^()]+)\), (?P<verdict>.+)$"
)


def versus(line: str) -> Versus | None:
    m = _PAIR.match(line.strip())
    if m is None or (seen := compared(f"{m['ratio']} {m['verdict']}")) is None:
        return None
    return Versus(m["name"], m["run"], seen, m["base"], m["base_run"])


def versus_lines(text: str) -> list[Versus]:
    return [v for line in text.splitlines() if (v := versus(line)) is not None]


# -- record's lines: events and the last one ------------------------------------------------------------
@dataclass(frozen=True)
class EventLine:
    """``[  12.3s] measured: goodput 50.0% of 20.0 s: …``: an event as ``record`` prints it."""

    time_s: float
    kind: str  # "measured", "changed", "phase", "stalled"…
    text: str  # the rest after "kind: " (or after "kind " for a change: "what: before → after")


_EVENT = re.compile(r"^(?:gpudash: )?\[ *(?P<t>[\d.]+)s\] (?P<kind>[a-z_]+)(?:(?:: | )(?P<text>.*))?$")


def event_line(line: str) -> EventLine | None:
    m = _EVENT.match(line.strip())
    if m is None:
        return None
    return EventLine(float(m["t"]), m["kind"], m["text"] or "")


def event_lines(text: str, kind: str | None = None) -> list[EventLine]:
    """Every event line in ``text`` (of ``kind``, when given), in order."""
    return [e for line in text.splitlines() if (e := event_line(line)) is not None and kind in (None, e.kind)]


@dataclass(frozen=True)
class Goodput:
    """``goodput 62.1% of 58.3 s: training 36.2 s · evaluation 9.8 s · …`` (a job's phases,
    ``job.phases.phases_line``): the share of wall time spent training and each phase's seconds."""

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
    """A recording's last line: ``gpudash: done: 120 samples, 131 rows in run.csv`` (its status
    ``done``, ``interrupted by SIGINT``, ``the job exited with code 7``…)."""

    status: str
    samples: int
    rows: int
    path: str | None  # None: written to stdout


_DONE = re.compile(r"^(?:gpudash: )?(?P<status>.+): (?P<samples>\d+) samples, (?P<rows>\d+) rows(?: in (?P<path>.+))?$")


def done_line(line: str) -> Done | None:
    m = _DONE.match(line.strip())
    if m is None:
        return None
    return Done(m["status"], int(m["samples"]), int(m["rows"]), m["path"])


def last_done(text: str) -> Done | None:
    """The last ``Done`` line of ``text`` (a recording's stderr)."""
    found = [d for line in text.splitlines() if (d := done_line(line)) is not None]
    return found[-1] if found else None


# -- a sweep's and tune's lines per measurement ------------------------------------------------------
@dataclass(frozen=True)
class SweepLine:
    """``sync_loss/fixed bs4: 74.9 ± 0.1 steps/s, 1.50× [1.49–1.51] of sync-heavy: faster (⚠ noisy: …)``
    (a configuration), ``… repeat 2: 74.9 ± 0.1 steps/s (1.5 s, 12 samples)`` (a repeat),
    ``fixed b32 · knobs: 1520 ± 12 samples/s (1.0 s)`` (tune), or ``NAME: failed: …``."""

    name: str
    figure: Figure | None  # None: failed, or no samples
    unit: str  # "steps/s", "samples/s"
    compared: Compared | None = None  # against the base, with its verdict
    base: str = ""
    seconds: float | None = None
    samples: int | None = None
    noisy: str = ""
    failed: str = ""
    rest: str = ""  # anything else said after the figure ("(baseline)"…)


_SWEEP = re.compile(rf"^(?:gpudash: )?(?P<name>.+?): (?P<figure>{FIGURE}) (?P<unit>\S+/s)(?P<rest>.*)$")
_OF_BASE = re.compile(r"^, (?P<ratio>.+?) of (?P<base>.+?): (?P<verdict>.+?)(?= \(⚠ |$)")
_TIMED = re.compile(r"^ \((?P<s>[\d.]+) s(?:, (?P<n>\d+) samples)?\)")


def sweep_line(line: str) -> SweepLine | None:
    text = line.strip().removeprefix("gpudash: ")
    failed = re.match(r"^(?P<name>.+?): (?P<why>failed: .*|no samples)$", text)
    if failed is not None:
        return SweepLine(failed["name"], None, "", failed=failed["why"])
    m = _SWEEP.match(text)
    if m is None:
        return None
    rest, noisy = m["rest"], ""
    if (at := rest.find(" (⚠ ")) >= 0 and rest.endswith(")"):
        rest, noisy = rest[:at], rest[at + 4 : -1]
    versus, timed = _OF_BASE.match(rest), _TIMED.match(rest)
    seen: Compared | None = None
    if versus is not None:
        seen = compared(f"{versus['ratio']} {versus['verdict']}")
        rest = rest[versus.end() :]
    elif timed is not None:
        rest = rest[timed.end() :]
    return SweepLine(
        name=m["name"],
        figure=figure(m["figure"]),
        unit=m["unit"],
        compared=seen,
        base=versus["base"] if versus is not None else "",
        seconds=float(timed["s"]) if timed is not None else None,
        samples=int(timed["n"]) if timed is not None and timed["n"] else None,
        noisy=noisy,
        rest=rest.strip(),
    )


# -- Markdown tables --------------------------------------------------------------------------------------
def table_rows(md: str, heading: str | None = None) -> list[list[str]]:
    """The cells of the Markdown table under ``heading`` (the first table of ``md`` when None),
    header and rule left out; ``\\|`` in a cell stays a ``|``."""
    section = md if heading is None else md.split(heading, 1)[1].split("\n## ", 1)[0]
    lines: list[str] = []
    for line in section.splitlines():
        if line.startswith("|"):
            lines.append(line)
        elif lines:
            break  # the table ended
    return [cells(line) for line in lines[2:]]


def cells(line: str) -> list[str]:
    """The cells of one Markdown table row, stripped; ``\\|`` in a cell stays a ``|``."""
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line.strip()[1:-1])]


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


# -- a sweep's or tune's account of its time ------------------------------------------------------------
_SPENT = re.compile(rf"^- (?P<label>.+?): (?P<s>{NUMBER}) s \((?P<pct>\d+)%\)$")


def time_account(md: str) -> dict[str, float]:
    """The seconds each part took, as "## Where the time went" lists them (``- measuring: 12.3 s (45%)``)."""
    section = md.split("## Where the time went", 1)[1].split("\n## ", 1)[0]
    return {m["label"]: number(m["s"]) for line in section.splitlines() if (m := _SPENT.match(line)) is not None}
