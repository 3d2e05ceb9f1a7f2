"""A/B across runs: each configuration of a run against its counterpart in another, with the
ratio of steps/s, its 95% interval and the verdict, as hyperfine compares commands.

Pairing, like with like (the same family and batch size, never across either): a configuration
is compared with the *same* configuration (variant, knobs) in the reference run when it has it,
else with the reference run's first configuration of its family and batch size — yesterday's
``sync-heavy`` recording against today's ``fixed`` one. The reference is ``--baseline``'s run,
or else the earliest run before it that has a counterpart.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gpudash.report.load import ConfigFigures, Run
from gpudash.stats.comparison import Comparison, Estimate, compare
from gpudash.stats.fmt import fmt_pm, fmt_ratio
from gpudash.stats.noise_tally import MARK


@dataclass(frozen=True)
class Pair:
    """One configuration of ``run`` against its counterpart ``base`` in ``base_run``."""

    run: Run
    config: ConfigFigures
    base_run: Run
    base: ConfigFigures
    comparison: Comparison | None  # None: a side has no steps/s

    @property
    def noisy(self) -> bool:
        """Either side was measured while the machine was noisy."""
        return bool(self.config.noise or self.base.noise)

    @property
    def same_configuration(self) -> bool:
        return self.config.key == self.base.key and self.config.label == self.base.label

    def sentence(self) -> str:
        """ "sync_loss/fixed bs4 (fixed.csv): 1.85× [1.80–1.90] sync_loss/sync-heavy bs4 (sync.csv), faster"."""
        if self.comparison is None:
            return f"{self.config.name} ({self.run.name}): no steps/s to compare"
        return (
            f"{self.config.name} ({self.run.name}): {fmt_ratio(self.comparison)} {self.base.name} "
            f"({self.base_run.name}), {self.comparison.verdict}" + (f" ({MARK})" if self.noisy else "")
        )


def _steps(run: Run, c: ConfigFigures) -> Estimate | None:
    return run.pooled(c.key, c.label)


def counterpart(run: Run, c: ConfigFigures) -> ConfigFigures | None:
    """``c``'s counterpart in ``run``: the same configuration, else the first of its family and
    batch size (None: ``run`` has neither)."""
    same = _exact(run, c)
    if same is not None:
        return same
    return next((o for o in run.configs if (o.key[0], o.key[2]) == (c.key[0], c.key[2]) and o.steps is not None), None)


def pairs(runs: Sequence[Run], baseline: int | None = None) -> list[Pair]:
    """Every configuration of every run but the reference, paired (``baseline``: the index of the
    run everything is compared with; None: each run against the runs before it)."""
    out: list[Pair] = []
    for j, run in enumerate(runs):
        if j == baseline or (baseline is None and j == 0):
            continue
        refs = [runs[baseline]] if baseline is not None else list(runs[:j])
        seen: set[tuple[object, str]] = set()
        for c in run.configs:
            if (c.key, c.label) in seen:
                continue  # one row per configuration: its segments pooled
            seen.add((c.key, c.label))
            found = next(((r, b) for r in refs for b in [_exact(r, c)] if b is not None), None)
            found = found or next(((r, b) for r in refs for b in [counterpart(r, c)] if b is not None), None)
            if found is None:
                continue
            ref, base = found
            a, b = _steps(ref, base), _steps(run, c)
            out.append(Pair(run, c, ref, base, None if a is None or b is None else compare(a, b)))
    return out


def _exact(run: Run, c: ConfigFigures) -> ConfigFigures | None:
    return next((o for o in run.configs if o.key == c.key and o.label == c.label and o.steps is not None), None)


def relative_table(runs: Sequence[Run], baseline: int | None = None) -> list[str]:
    """report.md's A/B section: one row per paired configuration."""
    found = pairs(runs, baseline)
    if not found:
        return ["No configuration of a run has a counterpart (the same family and batch size) in another."]
    lines = [
        "| configuration | run | against | in | steps/s | against's steps/s | ratio [95% CI] | verdict |",
        "|---|---|---|---|--:|--:|---|---|",
    ]
    for p in found:
        verdict = "–" if p.comparison is None else str(p.comparison.verdict) + (f" {MARK}" if p.noisy else "")
        ratio = "–" if p.comparison is None else fmt_ratio(p.comparison)
        against = "the same" if p.same_configuration else p.base.name
        lines.append(
            f"| {p.config.name} | {p.run.name} | {against} | {p.base_run.name} | "
            f"{fmt_pm(_steps(p.run, p.config))} | {fmt_pm(_steps(p.base_run, p.base))} | {ratio} | {verdict} |"
        )
    return lines
