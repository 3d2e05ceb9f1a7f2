"""``gpudash sweep``'s rounds: each family's configurations measured in interleaved, seeded shuffled
rounds on one session (the driver: ``gpudash.sweep.driver``), then, with ``--until-ci``, more rounds
while an interval is too wide.

Each round visits every configuration once (``plan.round_orders``): drift and thermals hit every
configuration alike. A configuration that failed is left out of later rounds. ``--max-minutes``
ends the sweep (``SweepStopped``) before the next configuration would start.
"""

from __future__ import annotations

from collections.abc import Iterator

from gpudash.core.protocol import ExitCode
from gpudash.sweep.driver import SessionDriver, SweepStopped
from gpudash.sweep.plan import round_orders, run_config
from gpudash.sweep.results import summarize, wide_intervals


class FamilyRun(SessionDriver):
    """One family's rounds on one ``EngineSession``; each finished result goes to the recorder."""

    def run(self) -> None:
        """Start the session in the first round's first configuration, measure every round, stop."""
        rounds = self._rounds()
        first = next(rounds)
        self.session = self.session_for(run_config(self.plan.configurations[first[1][0]], self.settings))
        try:
            self.start()
            self._round(*first)
            for number, order in rounds:
                self._round(number, order)
        finally:
            self.stop()

    def _rounds(self) -> Iterator[tuple[int, list[int]]]:
        """The planned rounds, then (``--until-ci``) more while an interval is too wide."""
        s = self.settings
        for number, order in enumerate(round_orders(len(self.plan.configurations), s.seed), start=1):
            if number > s.repeats:
                if s.until_ci is None or not self._needs_more(s.until_ci, number - 1):
                    return
                self.progress.add(sum(1 for c in self.plan.configurations if c not in self.failed))
            yield number, order

    def _needs_more(self, pct: float, rounds: int) -> bool:
        """``--until-ci``: another round? (Time up: ``SweepStopped``.)"""
        if not self._wide(pct):
            self.notes.append(f"{self.plan.family}: every steps/s interval within ±{pct:g}% after {rounds} rounds")
            return False
        if self.clock.up:
            raise SweepStopped(self._time_up_status(), ExitCode.OK)
        return True

    def _wide(self, pct: float) -> list[str]:
        """The configurations whose steps/s interval is wider than ±``pct``%, with their width."""
        summaries = summarize(self.plan.configurations, self.results)
        return [
            f"{s.config.name} ±{'?' if rel is None else f'{rel:.1f}'}%" for s, rel in wide_intervals(summaries, pct)
        ]

    def _time_up_status(self) -> str:
        """Why the sweep stopped at ``--max-minutes`` (and, with ``--until-ci``, what is still wide)."""
        status = f"--max-minutes {self.settings.max_minutes:g} reached"
        pct = self.settings.until_ci
        wide = self._wide(pct) if pct is not None else []
        if wide:
            status += f"; still wider than ±{pct:g}%: {', '.join(wide)}"
        return status

    def _round(self, number: int, order: list[int]) -> None:
        """Measure each configuration once in ``order`` (failed ones are left out)."""
        for i in order:
            config = self.plan.configurations[i]
            if config in self.failed:
                continue
            if self.clock.up:
                raise SweepStopped(self._time_up_status(), ExitCode.OK)
            self.measure_once(config, number)
