"""Figures as gpudash prints them, read back (``tests.printed``): a number, a mean and its interval,
a configuration's summary line and ``record``'s progress line, with every part a loaded machine adds."""

from __future__ import annotations

import re
from dataclasses import dataclass

MINUS = "\u2212"  # the typographic minus intervals print ("−2")
NOISY_MARK = "⚠ noisy"  # after a verdict measured while the machine was noisy
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
    elapsed of 01:00`` (a job's: ``… steps/s (95% CI over 6 steps)``), then `` · ⚠ noisy: host load:
    …`` when the machine is noisy."""

    now: float | None  # steps/s now (None: no sample yet)
    label: str | None  # the configuration (None: warming up before one is known)
    figure: Figure | None  # its mean since warm-up (None: still warming up)
    samples: int | None  # the samples its interval is over (a workload's)
    steps: int | None  # the steps its interval is over (a job's: "95% CI over 6 steps")
    too_short: str  # what a figure without an interval lacks: "needs ≈ 12 s more"; "" otherwise
    elapsed_s: int
    duration_s: int | None  # the --duration it runs for (None: until stopped)
    noisy: str  # "host load: other processes kept 1.9 of 2 CPUs busy"; "" when quiet


_NOW = re.compile(rf"(?:(?P<now>{NUMBER}) steps/s now|no sample yet)")
_MEAN = re.compile(
    rf"(?:(?P<label>.+?) )?(?:warming up|(?P<figure>{NUMBER}(?: ± {NUMBER}| \(no CI\))?) steps/s "
    r"\((?:95% CI, (?P<samples>\d+) samples|95% CI over (?P<steps>\d+) steps|"
    r"too short: (?P<short>[^)]*(?:\([^)]*\))?[^)]*))\))"
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
        steps=None if mean["steps"] is None else int(mean["steps"]),
        too_short=mean["short"] or "",
        elapsed_s=seconds(elapsed["elapsed"]),
        duration_s=None if elapsed["duration"] is None else seconds(elapsed["duration"]),
        noisy=" · ".join(extra).removeprefix(NOISY_MARK + ": "),
    )


def progress_lines(text: str) -> list[Progress]:
    """Every progress line in ``text`` (a command's stderr), in order."""
    return [p for line in text.splitlines() if (p := progress(line)) is not None]
