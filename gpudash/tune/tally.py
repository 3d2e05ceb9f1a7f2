"""What a ``gpudash tune`` race measured and decided, and the figures read from it: ``TuneTally``
holds the windows, the candidates and their fates, the diagnoses before and after and the loss
check, the winner and what it is weighed against (``gpudash.tune.report.TuneReport`` writes them
into the files as the race goes, ``gpudash.tune.tune_md`` into tune.md); ``reproduce`` is the one
command line that runs a candidate. Torch-free.
"""

from __future__ import annotations

import shlex

from gpudash.core.protocol import Event
from gpudash.stats.comparison import Comparison, Estimate, compare
from gpudash.sweep.results import ConfigSummary, RepeatResult, summarize_one
from gpudash.sweep.timing import TimeLedger
from gpudash.tune.candidates import Candidate
from gpudash.tune.plan import TunePlan


def mean_of(e: Estimate | None) -> float | None:
    """An estimate's mean (None: not measured)."""
    return None if e is None else e.mean


def reproduce(plan: TunePlan, c: Candidate) -> str:
    """The one command line that runs ``c`` in the dashboard (``--record`` makes it headless)."""
    from workloads.knobs import parse_knobs

    argv = ["gpudash", "-w", plan.family, "-v", c.config.variant, "-b", str(c.config.batch_size)]
    for name, value in parse_knobs(c.config.knobs).items():
        argv += ["--knob", name if value == "on" else f"{name}={value}"]
    if plan.settings.device != "auto":
        argv += ["--device", plan.settings.device]
    if plan.settings.seed:
        argv += ["--seed", str(plan.settings.seed)]
    if plan.settings.image_size is not None:
        argv += ["--image-size", str(plan.settings.image_size)]
    if plan.settings.workers is not None:
        argv += ["--workers", str(plan.settings.workers)]
    return shlex.join(argv)


class TuneTally:
    """The race's windows and decisions, and the figures of each candidate (``TuneReport`` writes them)."""

    def __init__(self, plan: TunePlan) -> None:
        self.plan = plan
        self.results: list[RepeatResult] = []
        self.candidates: list[Candidate] = []
        self.stage_of: dict[int, str] = {}  # rung number → the stage's name
        self.fates: dict[Candidate, str] = {}
        self.notes: list[str] = []
        self.refusals: list[str] = []
        self.before: Event | None = None
        self.after: Event | None = None
        self.loss: Event | None = None
        self.winner: Candidate | None = None
        self.plain: Candidate | None = None
        self.single: Candidate | None = None
        self.current: Candidate | None = None  # what ran when tune was asked (--current), at the first batch
        self.time = TimeLedger()  # where the wall clock went; per configuration, its switches' seconds

    # -- as the race goes -----------------------------------------------------------------------
    def add_candidates(self, candidates: list[Candidate]) -> None:
        self.candidates.extend(c for c in candidates if c not in self.candidates)

    def candidate_of(self, result: RepeatResult) -> Candidate:
        return next(c for c in self.candidates if c.config == result.config)

    def note(self, text: str) -> None:
        self.notes.append(text)

    # -- the figures ----------------------------------------------------------------------------
    def summary(self, c: Candidate) -> ConfigSummary:
        return summarize_one(c.config, self.results)

    def speed(self, c: Candidate | None) -> Estimate | None:
        return None if c is None else self.summary(c).stats.get("samples_per_s")

    def versus(self, base: Candidate | None) -> Comparison | None:
        """The winner's samples/s over ``base``'s, with its interval and verdict."""
        new, old = self.speed(self.winner), self.speed(base)
        if new is None or old is None or base == self.winner:
            return None
        return compare(old, new)

    def references(self) -> list[tuple[str, str, Candidate | None]]:
        """What the winner is weighed against, as (JSON key, words, candidate): what ran when tune
        was asked (where ``--current`` named it), the plain variant, the best single knob."""
        refs: list[tuple[str, str, Candidate | None]] = []
        if self.plan.current is not None:
            refs.append(("vs_current", "what runs now", self.current))
        refs.append(("vs_plain", "the plain variant", self.plain))
        refs.append(("vs_best_single_knob", "the best single knob", self.single))
        return refs

    def ranked(self) -> list[Candidate]:
        """Every candidate, the measured ones fastest first, then the unmeasured."""
        speeds = {c: self.speed(c) for c in self.candidates}
        return sorted(self.candidates, key=lambda c: (speeds[c] is None, -(mean_of(speeds[c]) or 0.0)))

    def fate(self, c: Candidate) -> str:
        if c == self.winner:
            return "the winner"
        if c in self.fates:
            return self.fates[c]
        return "not measured (the race stopped first)" if self.speed(c) is None else "finalist"
