"""The counterfactuals ``gpudash diagnose`` runs after its verdict (``gpudash.diagnosis.checks``
says which and what they mean): the job on one rank, and the DataLoader settings an input remedy
names, each a fresh recording of the user's job as ``gpudash tune`` makes one (``job_runs.run_once``).
Torch-free."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

from gpudash.diagnosis.checks import LOADER, ONE_RANK, Check, loader_settings
from gpudash.diagnosis.evidence import Evidence
from gpudash.job.command import one_rank_command
from gpudash.report.load import ReportInputError, load_run
from gpudash.stats.comparison import compare
from gpudash.tune.job_runs import Run, run_once, take_rates

# a check's run: as long as the diagnosed job ran to its verdict, within these (5 s: tune's shortest race)
MIN_SECONDS, MAX_SECONDS = 5.0, 120.0


def check_seconds(ran_s: float) -> float:
    """A check's run length (``record --duration``, which counts from the job's first step): the
    seconds the diagnosed job ran from its first step to its verdict (its warm-up and window: what
    its rate needed), within ``MIN_SECONDS``–``MAX_SECONDS``."""
    return min(MAX_SECONDS, max(MIN_SECONDS, ran_s))


def recorded_run(csv_path: Path) -> tuple[Run, int]:
    """The diagnosed run's own figures (its steps/s and samples/s after the warm-up, its profiler
    windows' steps left out) and its ranks."""
    run = Run("as diagnosed", ())
    try:
        recorded = load_run(csv_path)
    except (ReportInputError, OSError) as exc:
        run.error = str(exc)
        return run, 1
    if not take_rates(run, recorded):
        run.error = "no samples after the warm-up"
    return run, len({r.rank for r in recorded.ranks}) or 1


def run_checks(
    command: Sequence[str],
    diagnosed_csv: Path,
    evidence: Evidence,
    input_advice: str,
    seconds: float,
    folder: Path,
    say: Callable[[str], None],
) -> list[Check]:
    """The counterfactuals worth running for this job: one rank of a data-parallel job (its rate
    against the diagnosed run's), and the DataLoader settings its input remedy names
    (``input_advice``, "" where none is named), each raced against the job as written."""
    job, world = recorded_run(diagnosed_csv)
    checks: list[Check] = []
    try:
        if world > 1:
            checks.append(one_rank(command, job, world, seconds, folder, say))
        if input_advice:
            cpus = max(1, int(evidence.cpus or os.cpu_count() or 1) // world)  # a rank's, as tune counts them
            loader_races(command, evidence, input_advice, cpus, seconds, folder, say, checks)
    except KeyboardInterrupt:  # the verdict still comes, with the checks that finished
        say("the checks were interrupted: the verdict with those that finished")
    return checks


def one_rank(
    command: Sequence[str], job: Run, world: int, seconds: float, folder: Path, say: Callable[[str], None]
) -> Check:
    """The same job on one rank: its steps/s against the world's (the per-rank step, no collective)."""
    single = one_rank_command(command, world)
    if isinstance(single, str):
        return Check(ONE_RANK, "1 rank", skipped=single, world=world)
    if job.steps is None:
        return Check(ONE_RANK, "1 rank", skipped=f"the diagnosed run has no rate: {job.error}", world=world)
    say(f"checking: the same job on 1 rank for {seconds:.0f} s (its steps/s against {world} ranks')")
    alone = run_once(single, (), seconds, folder / "one-rank.csv")
    if alone.steps is None:
        why = f"on one rank the job did not run to a rate ({alone.error})"
        return Check(ONE_RANK, "1 rank", skipped=why, world=world)
    c = compare(job.steps, alone.steps)
    return Check(ONE_RANK, "1 rank", c, job.steps.mean, alone.steps.mean, "steps", world=world)


def loader_races(
    command: Sequence[str],
    evidence: Evidence,
    advice: str,
    cpus: int,
    seconds: float,
    folder: Path,
    say: Callable[[str], None],
    checks: list[Check],
) -> None:
    """Each DataLoader setting the input remedy's ``advice`` names (within a rank's ``cpus``), raced
    against the job as written: each added to ``checks`` as it ends."""
    settings = loader_settings(advice, evidence, cpus)
    if not settings:
        return
    say(f"checking: the job as written for {seconds:.0f} s, then with {', '.join(f'{k}={v}' for k, v in settings)}")
    written = run_once(list(command), (), seconds, folder / "as-written.csv")
    for key, value in settings:
        what = f"{key}={value}"
        if written.rate is None:
            checks.append(Check(LOADER, what, skipped=f"the job as written did not run to a rate ({written.error})"))
            continue
        run = run_once(list(command), ((key, value),), seconds, folder / f"loader-{key}.csv")
        if run.rate is None:
            checks.append(Check(LOADER, what, skipped=f"it did not run to a rate ({run.error})"))
            continue
        unit = "samples" if written.rate is written.samples else "steps"
        c = compare(written.rate, run.rate)
        checks.append(Check(LOADER, what, c, written.rate.mean, run.rate.mean, unit))
