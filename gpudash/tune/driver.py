"""The measuring under ``gpudash tune``'s race (``gpudash.tune.run.TuneRun`` decides what to
measure): ``TuneDriver``, on the sweep's session driver (``gpudash.sweep.driver.SessionDriver``),
measures a stage's candidates once each, a window after its warm-up; asks the running candidate
for a diagnosis or a loss check; and reads the standings from what was measured. ``TuneProgress``
names the race's stage on the sweep's progress bar. Never imports torch (the workload runs in the
child), textual or matplotlib.
"""

from __future__ import annotations

import dataclasses
import random
from typing import TYPE_CHECKING

from gpudash.core.protocol import DIAGNOSIS, Diagnose, Event, EventKind, LossEffect, RunConfig
from gpudash.recording.interrupt import Interrupted
from gpudash.stats.fmt import fmt_pm
from gpudash.sweep.driver import ConfigFailed, SessionDriver
from gpudash.sweep.plan import FamilyPlan
from gpudash.sweep.progress import SweepProgress
from gpudash.sweep.results import RepeatResult, summarize_one
from gpudash.sweep.window import Clock
from gpudash.tune import race
from gpudash.tune.candidates import Candidate, CandidateMaker
from gpudash.tune.plan import TunePlan

if TYPE_CHECKING:  # pragma: no cover
    from gpudash.host.session import EngineSession
    from gpudash.tune.report import TuneReport

MEASURED_TIMEOUT_S = 120.0  # a diagnosis window
DIAGNOSIS_S = 0.5  # a diagnosis window's steps: about this long (each half: timed, then profiled)
DIAGNOSIS_MIN_STEPS = 10


class BudgetSpent(Exception):
    """``--max-minutes`` passed: measure nothing more."""


class TuneProgress(SweepProgress):
    """The sweep's progress bar, naming the race's stage instead of a repeat."""

    stage = ""

    def start_unit(self, name: str, repeat: int, repeats: int) -> None:
        if self._bar is not None:
            self._bar.update(self._task, description=f"{name} · {self.stage}", completed=self.done)


class TuneDriver(SessionDriver):
    """One session measured for the race (``TuneRun``'s stages); each finished window goes to the report."""

    def __init__(self, plan: TunePlan, report: TuneReport, interrupted: Interrupted, progress: TuneProgress) -> None:
        from workloads.registry import family

        s = plan.settings
        family_plan = FamilyPlan(plan.family, plan.title, (), seconds=s.seconds, warmup=s.warmup)
        log = plan.out_dir / "tune.log"
        super().__init__(
            family_plan,
            s.sweep_settings(),
            session_for=lambda config: _session(config, log),
            interrupted=interrupted,
            progress=progress,
            clock=Clock(s.max_minutes),
            recorder=report,
        )
        self.tune, self.report, self.tune_progress = plan, report, progress
        self.maker = CandidateMaker(family(plan.family), s.device_type, plan.pool)
        self.rng = random.Random(s.seed)

    # -- measuring ------------------------------------------------------------------------------
    def describe(self, result: RepeatResult) -> str:
        """ "fixed+cuda_graph b32 · knobs: 1520 ± 12 samples/s (1.0 s)", or why it failed."""
        name = f"{result.config.label} b{result.config.batch_size} · {self.report.stage_of.get(result.repeat, '')}"
        if result.error:
            return f"{name}: failed: {result.error}"
        return f"{name}: {fmt_pm(result.estimates().get('samples_per_s'))} samples/s ({result.seconds:.1f} s)"

    def _stage(self, name: str, candidates: list[Candidate], seconds: float, number: int) -> None:
        """Measure each of ``candidates`` once, ``seconds`` after the warm-up, in the given order;
        their windows carry ``number`` (tune.csv's rung)."""
        self.plan = dataclasses.replace(self.plan, seconds=seconds)
        self.report.stage_of[number] = name
        self.tune_progress.stage = name
        self.tune_progress.add(len(candidates))
        for c in candidates:
            if c.config in self.failed:
                continue
            if self.clock.up:
                raise BudgetSpent
            self.measure_once(c.config, number)

    def _diagnose(self, candidate: Candidate) -> Event | None:
        """A diagnosis window of the running ``candidate`` (None: it failed; the note says why)."""
        self.progress.status(f"{candidate.label} b{candidate.config.batch_size} · diagnosing")
        try:
            control = Diagnose(diagnosis_steps(self._steps_per_s(candidate)))
            return self._ask(control, DIAGNOSIS, MEASURED_TIMEOUT_S, "diagnosing")
        except ConfigFailed as exc:
            self.report.note(f"diagnosis of {candidate.label}: {exc}")
            return None

    def _steps_per_s(self, candidate: Candidate) -> float | None:
        """``candidate``'s measured steps/s so far (None: nothing measured)."""
        steps = summarize_one(candidate.config, self.results).stats.get("steps_per_s")
        return None if steps is None else steps.mean

    def _ask(self, control: Diagnose | LossEffect, what: str, timeout: float, part: str) -> Event | None:
        """Send ``control``; its "measured" event (an "error" event is noted, None returned); the
        seconds go to ``part`` of the ledger."""
        answer = self.answer(control, what, timeout, what.replace("_", " "), part)
        if answer.kind == EventKind.ERROR:
            self.report.note(f"{what.replace('_', ' ')}: {answer.message}")
            return None
        return answer  # a diagnosis judged by the session, with NVML's figures from before its window

    # -- the figures ----------------------------------------------------------------------------
    def _standings(self, candidates: list[Candidate]) -> list[race.Standing]:
        out = []
        for c in candidates:
            summary = summarize_one(c.config, self.results)
            out.append(race.Standing(c, summary.stats.get("samples_per_s"), summary.error))
        return out

    def _decide(self, candidates: list[Candidate], cut: race.Cut) -> list[Candidate]:
        """Record why each dropped candidate stops; the kept ones, best first."""
        for key, why in cut.dropped.items():
            self.report.fates[self._by_key(key)] = why
        return [self._by_key(k) for k in cut.kept]

    def _by_key(self, key: object) -> Candidate:
        assert isinstance(key, Candidate)
        return key

    def _shuffled(self, candidates: list[Candidate]) -> list[Candidate]:
        order = list(candidates)
        self.rng.shuffle(order)
        return order

    def failed_candidates(self) -> set[Candidate]:
        return {c for c in self.report.candidates if c.config in self.failed}

    def plain_for(self, winner: Candidate) -> Candidate | None:
        """The family's plain variant without knobs at the winner's batch size."""
        return self.maker.made.get((self.tune.variants[0], winner.config.batch_size, "none"))

    def best_single(self) -> Candidate | None:
        """The single-knob candidate with the highest samples/s."""
        singles = [c for c in self.report.candidates if c.stage == "single"]
        lead = race.leader(self._standings(singles))
        return None if lead is None else self._by_key(lead.key)


def diagnosis_steps(steps_per_s: float | None) -> int:
    """A diagnosis window's steps: about ``DIAGNOSIS_S`` of the running step (at least
    ``DIAGNOSIS_MIN_STEPS``; at most, and with nothing measured, the dashboard's ``Diagnose()``)."""
    most = Diagnose().steps
    if steps_per_s is None:
        return most
    return max(DIAGNOSIS_MIN_STEPS, min(most, round(steps_per_s * DIAGNOSIS_S)))


def _session(config: RunConfig, log: object) -> EngineSession:
    from pathlib import Path

    from gpudash.host.session import EngineSession

    return EngineSession(config, log_path=Path(str(log)))
