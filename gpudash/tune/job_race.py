"""``gpudash tune [OPTIONS] -- CMD …``: the safe settings raced on the user's own job, unmodified.

Each candidate is a fresh run of the job under ``gpudash record --duration S --set …`` (the
settings applied from outside by the bootstrap: ``gpudash.job.settings``), measured as every
recording is, on its training steps after the warm-up (``gpudash.tune.job_runs``). The job as
written runs first: it names the training DataLoader's construction site and what it already
does. Then the worker count climbs (1, 2, 4, … up to the CPUs gpudash may use a rank, and on past
them while the workers' busy share leaves room in the CPUs, as a Dataset that reads from storage
does; at every count while their memory fits in what is free; never past a guard's ceiling: their
readings come from the process tree, ``gpudash.tune.worker_cpu``) while each step is *faster* than
the best so far; a run already slower than the best at half its seconds is stopped; then, on the
best count, each of the other settings (persistent workers and prefetching with workers; pinned
memory, ``cudnn.benchmark`` and ``expandable_segments`` on CUDA) is kept where it is faster. The
winner is compared with the job as written (``stats.comparison.compare``: its interval and
verdict); its change is said as an edit of the user's source (``gpudash.tune.job_edits``). A
candidate whose run fails drops out with the job's last lines; ``--max-minutes`` ends the race.
``--allow-numerics`` adds TF32 (CUDA) and bf16 autocast, ``--allow-compile`` the model compiled,
each where the job's first step says it lacks them (``GPUDASH_JOB_WATCH_MODEL``); what the job
already sets is said, not raced. With ``--json`` stdout is one document (the diff in it); the
progress lines go to stderr. The document and the files are ``gpudash.tune.job_answer``'s. Torch-free.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from gpudash.arguments import shared_flags
from gpudash.arguments.argtypes import ExitCode, Parser, UsageError, positive_float
from gpudash.core.job_settings import settings_of
from gpudash.job.command import JobCommandError, check_command
from gpudash.job.settings import LOADER_SITE, Settings, describe
from gpudash.stats.comparison import Verdict, compare
from gpudash.stats.fmt import fmt_ratio
from gpudash.tune import job_edits
from gpudash.tune.job_answer import answer, notes, write_files
from gpudash.tune.job_runs import Run, faster, run_once, shown, slower
from gpudash.tune.plan import JOB_OPT_INS
from gpudash.tune.worker_cpu import GUARD_WORKERS, ceiling, no_room

BATCH_HEADROOM = 0.05  # of what is said to fit, left for the estimate's error (H100: 51 said, 50 fitted)
START_S = 8.0  # a run's start-up (torch's import, the job's own) beyond its measured seconds, for the plan


def build_parser() -> Parser:
    """The parser of ``gpudash tune [OPTIONS] -- CMD``: a bad option is one line and exit 2, with the
    flag meant (``Parser``)."""
    p = Parser(prog="gpudash tune", description="race the safe settings on your job: gpudash tune [OPTIONS] -- CMD ...")
    p.add_argument(
        "--seconds", type=positive_float, default=30.0, help="each run's length, start-up included (default: 30)"
    )
    p.add_argument("--max-minutes", type=positive_float, default=10.0, help="the race's budget (default: 10)")
    p.add_argument(
        "--out", default="tune", help="the folder for tune.md, tune.csv, tune.png and the runs (default: tune)"
    )
    shared_flags.add_json(p)
    p.add_argument("--diff", action="store_true", help="print the change as a unified diff of your files")
    for flag, what in JOB_OPT_INS.items():
        p.add_argument(flag, action="store_true", help=f"also race {what}")
    shared_flags.add_quiet(p)
    return p


def _say(quiet: bool, text: str) -> None:
    if not quiet:
        print(f"gpudash: {text}", file=sys.stderr, flush=True)


def worker_ladder(now: int, cpus: int) -> list[int]:
    """The worker counts to climb past ``now``: powers of two up to the guard's ``ceiling`` (past
    the CPUs only while the workers' busy share and memory leave room: ``JobRace.climb``)."""
    out, n = [], 1
    while n <= ceiling(cpus):
        if n > now:
            out.append(n)
        n *= 2
    return out


def _have(started: dict[str, Any]) -> dict[str, str]:
    """What the job as written does (its training DataLoader's arguments and site, its flags)."""
    return settings_of(started.get("settings"))


class JobRace:
    """One race: ``runs`` in the order run, the budget's deadline, the scratch folder."""

    def __init__(self, command: list[str], args: argparse.Namespace, out: Path) -> None:
        self.command, self.args, self.out = command, args, out
        self.runs: list[Run] = []
        self.deadline = time.monotonic() + 60.0 * args.max_minutes
        self.on_cuda = False
        self.stopped: str | None = None  # what stopped the worker climb, where a bound did

    def measure(self, settings: Settings, beat: Run | None = None) -> Run | None:
        """One more run, unless the budget is spent (dropped early where slower than ``beat``)."""
        if time.monotonic() + self.args.seconds > self.deadline:
            _say(
                self.args.quiet,
                f"budget spent (--max-minutes {self.args.max_minutes:g}): not run: {describe(settings)}",
            )
            return None
        path = self.out / "runs" / f"run{len(self.runs)}.csv"
        watch = self.args.allow_numerics or self.args.allow_compile
        run = run_once(self.command, settings, self.args.seconds, path, beat, watch=watch)
        self.runs.append(run)
        _say(self.args.quiet, f"{run.name}: {shown(run)}")
        return run

    def race(self) -> tuple[Run, Run]:
        """(the job as written, the winner)."""
        base = self.measure(())
        if base is None or base.rate is None:
            raise RuntimeError(f"the job as written did not run: {base.error if base else 'no budget'}")
        have = _have(base.started)
        self.on_cuda = str(base.started.get("device", "")).startswith("cuda")
        if own := self.set_by_job(have):
            _say(self.args.quiet, f"set by the job, not raced: {', '.join(own)}")
        site = ((LOADER_SITE, have["site"]),) if have.get("site") else ()
        best = self.climb(base, have, site) if "num_workers" in have else base  # a DataLoader feeds its steps
        for key, value in self._extras(have, best):
            settings = {**dict(best.settings), key: value, **dict(site)}  # the loader's site last
            run = self.measure(tuple(settings.items()), beat=best)
            if run is not None and faster(best, run) is not None:
                best = run
        if getattr(self.args, "allow_batch", False):
            best = self.larger_batch(base, best, site)
        return base, best

    def larger_batch(self, base: Run, best: Run, site: Settings) -> Run:
        """The largest batch a GPU's memory figures say fits (less ``BATCH_HEADROOM``, a multiple of 8
        from 16 up), on top of the best settings, run to check it; where it does not fit (or runs
        no faster in samples/s), halfway back to the job's own batch once. Said where it cannot be
        raced: on the CPU, no DataLoader seen, batches not counted, the memory not measured."""
        memory, why = base.memory, ""
        now, fits = int(memory.get("batch") or 0), int(memory.get("fits_batch") or 0)
        if not self.on_cuda:
            why = "the job runs on the CPU: no GPU memory to fill"
        elif not site:
            why = "no DataLoader's batch size seen to set"
        elif base.samples is None or not base.samples.mean:
            why = "the job's samples are not counted: a larger batch's speed could not be told"
        elif not fits:
            why = "what fits is not known (its memory by kind was not measured)"
        elif int(memory.get("passes") or 1) > 1:
            passes = memory["passes"]
            why = f"the job accumulates gradients over {passes} passes a step: its loader's batch is not a pass's"
        elif (target := _batch_target(fits)) <= now:
            why = f"batch {now} is about as large as fits ({fits})"
        if why:
            _say(self.args.quiet, f"a larger batch not raced: {why}")
            return best
        for batch in (target, (now + target) // 2):
            if batch <= now:
                break
            run = self.measure(tuple({**dict(best.settings), "batch_size": str(batch), **dict(site)}.items()))
            if run is not None and run.rate is not None and faster(best, run) is not None:
                return run
            if run is None or not run.error:
                break  # it ran, no faster: a smaller one would not be either
        return best

    def climb(self, base: Run, have: dict[str, str], site: Settings) -> Run:
        """The worker count, climbed in powers of two while faster: up to this machine's CPUs a
        rank, and past them while the workers' busy share leaves room in the CPUs; at every count
        while the workers' memory leaves room in what is free (``worker_cpu.no_room``, read from the
        best count's workers, or the latest count's where the best has none); never past the
        guard's ``ceiling``. What stopped it goes to ``stopped`` and the progress line."""
        cpus = max(len(os.sched_getaffinity(0)) // max(self.ranks, 1), 1)
        now = int(have["num_workers"] or 0)
        best, stale, last = base, 0, now  # stale: counts in a row not faster (one worker may be slower than none)
        for workers in worker_ladder(now, cpus):
            seen = next((r for r in (best, *reversed(self.runs)) if r.worker_busy is not None), best)
            at = int(dict(seen.settings).get("num_workers", now))
            why = no_room(workers, at, seen.worker_busy, seen.worker_memory, cpus, self.ranks)
            if why is not None:
                self.stopped = f"stopped at {last} worker{'s' * (last != 1)}: {why}"
                break
            run = self.measure((("num_workers", str(workers)), *site), beat=best)
            if run is None:
                break  # the budget is spent
            last = workers
            best, stale = (run, 0) if faster(best, run) is not None else (best, stale + 1)
            if stale >= 2 or (best is not base and slower(best, run)):
                break  # two counts in a row no faster, or past the peak
        else:
            if last == ceiling(cpus) > cpus:
                self.stopped = f"stopped at {last} workers: the guard's ceiling ({GUARD_WORKERS} a rank)"
        if self.stopped:
            _say(self.args.quiet, self.stopped)
        return best

    @property
    def ranks(self) -> int:
        """The job's ranks on this machine (a torchrun job's each have their own loader)."""
        return self.runs[0].ranks if self.runs else 1

    def set_by_job(self, have: dict[str, str]) -> list[str]:
        """The settings raced elsewhere that the job as written already has: not raced."""
        own = {"pin_memory": "True", "persistent_workers": "True", "cudnn_benchmark": "True"}
        if self.args.allow_numerics:
            own |= {"tf32": "True", "autocast": "True"}
        if self.args.allow_compile:
            own["compiled"] = "True"
        return [f"{k}={v}" for k, v in own.items() if have.get(k) == v]

    def _extras(self, have: dict[str, str], best: Run) -> list[tuple[str, str]]:
        """The other settings to try on the best worker count, where they apply and the job lacks them."""
        workers = int(dict(best.settings).get("num_workers", have.get("num_workers") or 0) or 0)
        out = []
        if workers and have.get("persistent_workers") != "True":
            out.append(("persistent_workers", "True"))
        if workers:
            out.append(("prefetch_factor", "4"))
        if self.on_cuda and "num_workers" in have and have.get("pin_memory") != "True":
            out.append(("pin_memory", "True"))
        if self.on_cuda and have.get("cudnn_benchmark") != "True":
            out.append(("cudnn_benchmark", "True"))
        if self.on_cuda:
            out.append(("expandable_segments", "True"))
        if self.args.allow_numerics and self.on_cuda and have.get("tf32") == "False":
            out.append(("tf32", "True"))
        if self.args.allow_numerics and have.get("autocast") == "False":
            out.append(("autocast", "bf16"))
        if self.args.allow_compile and have.get("compiled") == "False":
            out.append(("compile", "True"))  # last: its compilation makes the longest start
        return out


def _batch_target(fits: int) -> int:
    """The batch to try where ``fits`` is said to fit: ``BATCH_HEADROOM`` off, a multiple of 8 from 16."""
    batch = int(fits * (1 - BATCH_HEADROOM))
    return batch - batch % 8 if batch >= 16 else batch


def main(argv: list[str]) -> int:
    """``gpudash tune [OPTIONS] -- CMD``."""
    from gpudash.job.command import split_job

    before, command = split_job(argv)
    args = build_parser().parse_args(before)
    try:
        check_command(command or [])
        if args.seconds < 5 or args.max_minutes <= 0:
            raise UsageError("--seconds is 5 or more and --max-minutes over 0")
    except (JobCommandError, UsageError) as exc:
        print(f"gpudash: error: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    assert command is not None
    out = Path(args.out)
    (out / "runs").mkdir(parents=True, exist_ok=True)
    _say(args.quiet, plan_line(args, len(os.sched_getaffinity(0))))
    race = JobRace(command, args, out)
    try:
        base, winner = race.race()
    except RuntimeError as exc:
        print(f"gpudash: error: {exc}", file=sys.stderr)
        return ExitCode.FAILED
    _tell(args, command, race, base, winner)
    return ExitCode.OK


def plan_line(args: argparse.Namespace, cpus: int) -> str:
    """What the race plans: its runs, how many more the climb past the CPUs may take, how long."""
    ladder = worker_ladder(0, cpus)
    planned = 1 + len([n for n in ladder if n <= cpus]) + 2 + 2 * args.allow_numerics + args.allow_compile
    planned += getattr(args, "allow_batch", False)
    most = planned + len([n for n in ladder if n > cpus])  # past the CPUs while the workers mostly wait
    minutes = planned * (args.seconds + START_S) / 60
    past = (
        f"; where the workers mostly wait, up to {most - planned} more past the {cpus} CPUs (while their busy "
        f"share and the free memory leave room, {ceiling(cpus)} workers at most)"
        if most > planned
        else ""
    )
    return (
        f"racing your job: about {planned} runs of {args.seconds:g} s, about {max(1, round(minutes))} min "
        f"(--max-minutes {args.max_minutes:g} stops it at {args.max_minutes:g}){past}"
    )


def _tell(args: argparse.Namespace, command: list[str], race: JobRace, base: Run, winner: Run) -> None:
    """The answer: the files in ``--out``; on stdout its lines, or with ``--json`` one document only."""
    c = compare(base.rate, winner.rate) if base.rate and winner.rate and winner is not base else None
    if c is None or c.verdict != Verdict.FASTER:
        winner = base
    have = _have(base.started)
    job = {**have, "device": str(base.started.get("device", ""))}
    edits = job_edits.edits(winner.settings, have.get("site", ""), command, job)
    sentence = (
        f"{winner.name}: {c.verdict} {fmt_ratio(c)} than the job as written"
        if c is not None and winner is not base
        else "the job as written: no setting raced was faster"
    )
    doc = {**answer(base, winner, race.runs, edits, race.stopped), "notes": notes(have, base, winner)}
    written = write_files(race.out, command, race.runs, doc, sentence)
    if args.json:
        print(json.dumps(doc, indent=2))  # the diff is in it: stdout is this one document
    else:
        if not args.quiet:
            print("\n".join([sentence, *(f"note: {n}" for n in doc["notes"])]))
            for e in edits:
                print(f"  {e.file}:{e.line}: {e.before.strip()}  →  {e.after.strip()}")
        if args.diff:
            sys.stdout.write(doc["diff"] or "")
    _say(args.quiet, f"wrote {', '.join(written)} in {race.out}")
