"""``gpudash tune``: race a family's configurations on one session and name the fastest.

Never imports torch (the workload runs in the child), textual or matplotlib. The candidates are
``gpudash.tune.candidates``'; the decisions ``gpudash.tune.race``'s; the measuring is
``gpudash.tune.driver.TuneDriver``'s, the base of ``TuneRun``, on the sweep's session driver
(``gpudash.sweep.driver.SessionDriver``: each window after its warm-up, switches by
``switch_controls``); the files ``gpudash.tune.report``'s.

The race, in order:

1. the plain variants at every batch size, once each (the start configuration first, then a
   diagnosis of it: what bounds the plain run orders the knobs), again where one has no interval
   yet (a slow variant's first window may hold too few samples to judge it);
2. each batch size's leading variant with the knobs alone and the knob stacks, once each, in
   the diagnosis' order; a runner-up variant with the stacks that led there; ``compile`` last,
   on the fast stack, where it can still reach the leader;
3. rungs of successive halving, each in a seeded shuffled order, each window ``GROWTH`` times the
   last, until one candidate is left, the rest are within its noise, or ``MAX_RUNGS``;
4. a last interleaved round of the leader, the plain variant at its batch size and the best
   single knob (the winner's comparisons), with the other finalists unless a rung has just
   measured them side by side; then the leader and its closest rival again while the leader's
   interval is wider than ``race.PRECISION`` (at most ``race.EXTRA_ROUNDS`` times);
5. a diagnosis of the winner and, when its knobs change the number format, its loss against the
   plain run's over the same steps.

``--max-minutes`` ends measuring wherever it is (the winner is then named from what was
measured); Ctrl-C does too, and the files hold every finished window.
"""

from __future__ import annotations

import json
import os
import sys
import time

from gpudash.core.protocol import LOSS_EFFECT, ExitCode, LossEffect
from gpudash.diagnosis.judge import judgement_of
from gpudash.recording.interrupt import Interrupted
from gpudash.sweep.command import parse_plan
from gpudash.sweep.driver import CHANGE_TIMEOUT_S, ConfigFailed, SweepStopped
from gpudash.sweep.plan import run_config
from gpudash.tune import race
from gpudash.tune.candidates import COMPILE, GPU_BOUNDS, Candidate
from gpudash.tune.driver import BudgetSpent, TuneDriver, TuneProgress
from gpudash.tune.plan import JOB_OPT_INS, TunePlan, build_parser, plan_from_args


class TuneRun(TuneDriver):
    """The race on one ``EngineSession``; each finished window goes to the report."""

    # -- the race -------------------------------------------------------------------------------
    def run_race(self) -> None:
        """Measure the stages in turn (``SweepStopped``: a signal or the workload's end)."""
        first = self.maker.variants(self.tune.variants, self.tune.batch_sizes)
        self.report.add_candidates(first)
        self.session = self.session_for(run_config(first[0].config, self.settings))
        try:
            self.start()
            try:
                self._race(first)
            except BudgetSpent:
                minutes = self.tune.settings.max_minutes
                self.report.note(f"--max-minutes {minutes:g} reached: the winner is named from what was measured")
            self._conclude()
        finally:
            self.stop()

    def _race(self, first: list[Candidate]) -> None:
        s = self.tune.settings
        self._stage("plain variants", first[:1], s.seconds, 1)
        self.report.before = self._diagnose(first[0])
        self._stage("plain variants", first[1:], s.seconds, 1)
        now = self._current(first)
        self._until_intervals("plain variants", first + now, s.seconds, 1)  # a variant is not kept for want of one
        survivors = self._decide(
            first, race.variant_cut(self._standings(first), {c: c.config.batch_size for c in first})
        )
        judged = judgement_of(self.report.before) if self.report.before else None
        bound = str(judged.head.bound) if judged is not None else None
        with_compile = self.tune.compile_asked or bound in GPU_BOUNDS
        self.report.refusals = self.maker.refusals  # one list: the refused and the skipped, as they come
        if not with_compile and any(name == COMPILE for name, _ in self.tune.pool):
            self.report.refusals.append(
                f"knob compile: the plain run is {bound or 'not diagnosed'}, not GPU-bound, so fusion has little to "
                "shorten and its warm-up costs tens of seconds a candidate (--knobs ...,compile races it anyway)"
            )
        second = self._knob_stage(survivors, bound, with_compile)
        alive = list(dict.fromkeys(survivors + now + [c for c in second if c not in self.failed_candidates()]))
        seconds, rung_measured = s.seconds, False
        for rung in range(1, race.MAX_RUNGS + 1):
            alive = self._decide(alive, race.cut(self._standings(alive)))
            if race.settled(self._standings(alive)):
                break
            seconds *= race.GROWTH
            self._stage(f"rung {rung}", self._shuffled(alive), seconds, 2 + rung)
            rung_measured = True
        self._confirm(alive, seconds, rung_measured)

    def _current(self, first: list[Candidate]) -> list[Candidate]:
        """What runs now (``--current``) at the first batch size, measured once beside the plain
        variants when it is not one of them; kept out of their cut, it meets the rest in the rungs."""
        current = self.tune.current
        if current is None:
            return []
        made = self.maker.current(*current, self.tune.batch_sizes[0])
        self.report.current = made
        if made in first:
            return []
        self.report.add_candidates([made])
        self._stage("what runs now", [made], self.tune.settings.seconds, 1)
        return [made]

    def _knob_stage(self, survivors: list[Candidate], bound: str | None, with_compile: bool) -> list[Candidate]:
        """The knobs on the survivors, measured once each: the leading variant's singles and stacks,
        the stacks that led there on each runner-up, then compile where it can still catch up."""
        leaders: dict[int, Candidate] = {}
        for c in survivors:  # best first per batch size
            leaders.setdefault(c.config.batch_size, c)
        second = self._measure_new("knobs", self.maker.knobs(list(leaders.values()), bound))
        for runner_up in (c for c in survivors if c not in leaders.values()):
            b = runner_up.config.batch_size
            stacks = [c for c in second if c.stage == "stack" and c.config.batch_size == b]
            kept = [self._by_key(k) for k in race.followed_stacks(self._standings(stacks))]
            follow = self.maker.follow(runner_up, leaders[b], kept)
            left = [c.label.split("+", 1)[1] for c in stacks if c not in kept]
            if left:
                self.report.refusals.append(
                    f"{runner_up.label} b{b} with {', '.join(left)}: those stacks did not lead on "
                    f"{leaders[b].label} (a runner-up variant gets only the stacks that led on the leading one)"
                )
            second = second + self._measure_new("knobs", follow)
        if with_compile:
            second = second + self._measure_new("knobs", self._compile_candidates(survivors))
        return second

    def _compile_candidates(self, survivors: list[Candidate]) -> list[Candidate]:
        """``compile`` on each survivor's fast stack, unless that stack cannot reach its batch
        size's leader with it (``race.compile_out_of_reach``; ``--knobs ...,compile``: always)."""
        out: list[Candidate] = []
        if COMPILE not in self.maker.pool:
            return out
        for c in survivors:
            base, b = self.maker.compile_base(c), c.config.batch_size
            lead = race.leader(self._standings([x for x in self.report.candidates if x.config.batch_size == b]))
            why = None
            if self.tune.compile_asked:
                pass  # asked for by name: raced wherever it runs
            elif base is None or base not in self.report.candidates:
                why = "its stack without compile was not tried (it did not lead on the leading variant)"
            elif lead is not None:
                why = race.compile_out_of_reach(lead, self._standings([base])[0])
            compiled = self.maker.compiled(c) if why is None else None
            if compiled is not None:
                out.append(compiled)
            elif why is not None:
                self.report.refusals.append(f"compile on {c.label} b{b}: {why}")
        return out

    def _measure_new(self, name: str, candidates: list[Candidate]) -> list[Candidate]:
        """Add ``candidates`` to the report and measure each once (the knob stage's rung)."""
        if candidates:
            self.report.add_candidates(candidates)
            self._stage(name, candidates, self.tune.settings.seconds, 2)
        return candidates

    def _confirm(self, alive: list[Candidate], seconds: float, rung_measured: bool) -> None:
        """A last interleaved round: the leader and its references (the plain variant, the best
        single knob), and the other finalists unless a rung has just measured them all side by
        side (``rung_measured``)."""
        lead = race.leader(self._standings(alive))
        if lead is None:
            return
        winner = self._by_key(lead.key)
        refs = [r for r in (self.report.current, self.plain_for(winner), self.best_single()) if r is not None]
        finalists = list(dict.fromkeys([winner, *refs] if rung_measured else [*alive, *refs]))
        self._stage("final round", self._shuffled(finalists), seconds, race.MAX_RUNGS + 3)
        self._until_intervals("final round", finalists, seconds, race.MAX_RUNGS + 3)
        self._sharpen(finalists, seconds, race.MAX_RUNGS + 3)

    def _sharpen(self, finalists: list[Candidate], seconds: float, number: int) -> None:
        """The leader and the finalist closest behind it, measured again side by side, at most
        ``race.EXTRA_ROUNDS`` times, while the leader's interval is wider than ``race.PRECISION`` of its
        mean: the winner's figure is what tune.md reports and what a comparison with it can decide
        (two windows of a compiled ResNet-50 step gave ±12.5%)."""
        for _ in range(race.EXTRA_ROUNDS):
            standings = self._standings(finalists)
            lead = race.leader(standings)
            if lead is None or not race.imprecise(lead):
                return
            rival = race.runner_up(lead, standings)
            again = [self._by_key(lead.key), *([self._by_key(rival.key)] if rival is not None else [])]
            self._stage("final round", self._shuffled(again), seconds, number)

    def _until_intervals(self, name: str, candidates: list[Candidate], seconds: float, number: int) -> None:
        """Measure again, at most ``race.EXTRA_ROUNDS`` times, those of ``candidates`` still without an
        interval: a comparison needs both (a slow step or a loaded host gives few samples a window)."""
        for _ in range(race.EXTRA_ROUNDS):
            short = [s.key for s in self._standings(candidates) if s.speed is not None and not s.speed.has_interval]
            if not short:
                return
            self._stage(name, [self._by_key(k) for k in short], seconds, number)

    def name_winner(self) -> Candidate | None:
        """The fastest candidate measured (and its references) into the report; no session needed
        (after Ctrl-C too)."""
        lead = race.leader(self._standings(list(self.report.candidates)))
        if lead is None:
            return None
        winner = self._by_key(lead.key)
        self.report.winner = winner
        self.report.plain = self.plain_for(winner)
        self.report.single = self.best_single()
        self.report.fates.setdefault(winner, "the winner")
        return winner

    def _conclude(self) -> None:
        """Name the winner; diagnose it; check its loss where its knobs change the number format."""
        winner = self.name_winner()
        if winner is None:
            return
        try:
            self.tune_progress.stage = "diagnosis of the winner"
            self.switch(winner.config)
            self.report.after = self._diagnose(winner)
            if _changes_precision(winner.config.knobs):
                steps = self.tune.settings.loss_steps
                self.report.loss = self._ask(LossEffect(steps), LOSS_EFFECT, CHANGE_TIMEOUT_S, "checking_loss")
        except ConfigFailed as exc:
            self.report.note(f"after the race: {exc}")


def _changes_precision(knobs_text: str) -> bool:
    """Whether any of the knobs changes a number format (``KnobInfo.changes_precision``)."""
    from workloads.knobs import KNOBS, parse_knobs

    return any(KNOBS[name].changes_precision for name in parse_knobs(knobs_text))


def _say(text: str) -> None:
    print(f"gpudash: {text}", file=sys.stderr, flush=True)


def run_tune(plan: TunePlan, *, quiet: bool = False, as_json: bool = False) -> int:
    """Race ``plan`` and write its files; returns the exit status (an ``ExitCode``). The answer
    on stdout: its lines, or (``as_json``) ``tune.json``'s document."""
    from gpudash.tune.report import TuneReport

    started = time.monotonic()
    try:
        report = TuneReport(plan)
    except OSError as exc:
        _say(f"error: cannot write in {plan.out_dir}: {exc.strerror or exc}")
        return ExitCode.FAILED
    status, code = "done", ExitCode.OK
    with Interrupted() as interrupted, TuneProgress(quiet, 0) as progress:
        assert isinstance(progress, TuneProgress)
        run = TuneRun(plan, report, interrupted, progress)
        try:
            run.run_race()
        except SweepStopped as exc:
            status, code = exc.status, exc.code
        except KeyboardInterrupt:
            status, code = "interrupted by SIGINT", ExitCode.INTERRUPTED
        except OSError as exc:
            status, code = f"write failed: {exc.strerror or exc}", ExitCode.FAILED
        if report.winner is None:  # stopped before the end: the fastest of what was measured
            run.name_winner()
    if code == ExitCode.OK and report.winner is None:
        status, code = "nothing could be measured", ExitCode.FAILED
    written = report.finish(status, code, time.monotonic() - started)
    if code == ExitCode.FAILED:
        _say(f"error: {status}")
    if as_json:
        print(json.dumps(report.meta, indent=2, default=str), flush=True)
    elif not quiet or code == ExitCode.OK:
        for line in report.summary_lines():
            print(line)
    if not quiet:
        _say(f"wrote {', '.join(written)} in {plan.out_dir}")
    return code


JOB_ONLY = (*JOB_OPT_INS, "--diff")  # tune -- CMD's options, not a family's


def _a_job_without_dashes(argv: list[str]) -> bool:
    """Whether ``argv`` names a job but not after ``--`` (``gpudash tune python train.py``): no
    family given, and a script, an interpreter or an option only a job's race takes."""
    if any(a in ("-w", "--workload", "--preset") or a.startswith(("-w", "--workload=", "--preset=")) for a in argv):
        return False
    words = [a for a in argv if not a.startswith("-")]
    command = any(a.endswith(".py") or os.path.basename(a).startswith(("python", "torchrun")) for a in words)
    return command or any(a in JOB_ONLY for a in argv)


def main(argv: list[str]) -> int:
    """``gpudash tune ...``: check the arguments, then race (``-- CMD``: on the user's job)."""
    if "--" in argv:
        from gpudash.tune.job_race import main as tune_job

        return tune_job(argv)
    if _a_job_without_dashes(argv):
        print(
            "gpudash: error: give your job after --: gpudash tune [OPTIONS] -- python train.py "
            "(or a family: gpudash tune -w FAMILY)",
            file=sys.stderr,
        )
        return ExitCode.USAGE
    parsed = parse_plan(argv, build_parser(), plan_from_args)
    if parsed is None:
        return ExitCode.USAGE
    args, plan = parsed
    if not args.quiet:
        for line in plan.skipped:
            _say(f"not tried: {line}")
    return run_tune(plan, quiet=args.quiet, as_json=args.json)
