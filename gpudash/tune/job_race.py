"""``gpudash tune [OPTIONS] -- CMD …``: the safe settings raced on the user's own job, unmodified.

Each candidate is a fresh run of the job under ``gpudash record --duration S --set …`` (the
settings applied from outside by the bootstrap: ``gpudash.job.settings``), measured as every
recording is, on its training steps after the warm-up (``gpudash.report.load``). The job as
written runs first: it names the training DataLoader's construction site and what it already
does. Then the worker count climbs (1, 2, 4, … up to the CPUs gpudash may use a rank, and on to
four times that while the workers mostly wait, as a Dataset that reads from storage does: their CPU
use is read from the process tree, ``gpudash.tune.worker_cpu``) while each step is *faster* than
the best so far; a run already slower than the best at half its seconds is stopped; then, on the
best count, each of the other settings (persistent workers and prefetching with workers; pinned
memory, ``cudnn.benchmark`` and ``expandable_segments`` on CUDA) is kept where it is faster. The
winner is compared with the job as written (``stats.comparison.compare``: its interval and
verdict); its change is said as an edit of the user's source (``gpudash.tune.job_edits``). A
candidate whose run fails drops out with the job's last lines; ``--max-minutes`` ends the race.
``--allow-numerics`` adds TF32 (CUDA) and bf16 autocast, ``--allow-compile`` the model compiled,
each where the job's first step says it lacks them (``GPUDASH_JOB_WATCH_MODEL``); what the job
already sets is said, not raced.
Torch-free.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpudash.cli.argtypes import ExitCode, UsageError
from gpudash.diagnosis.rules import job_settings
from gpudash.job.command import JobCommandError, check_command
from gpudash.job.settings import LOADER_SITE, WATCH_ENV, Settings, describe
from gpudash.report.load import ReportInputError, load_run
from gpudash.report.load import Run as Recorded
from gpudash.stats.comparison import Comparison, Estimate, Verdict, compare
from gpudash.stats.fmt import fmt_ratio
from gpudash.tune import job_edits
from gpudash.tune.worker_cpu import WorkerCpu

KEEP_FROM = 1.05  # a candidate replaces the best only this much faster at its interval's low end
START_S = 8.0  # a run's start-up (torch's import, the job's own) beyond its measured seconds, for the plan


@dataclass
class Run:
    """One candidate's run: its settings and figures (None where it failed: ``error``)."""

    name: str
    settings: Settings
    samples: Estimate | None = None
    steps: Estimate | None = None
    error: str = ""
    started: dict[str, Any] = field(default_factory=dict)
    dropped: bool = False  # stopped early: slower than the best at half its seconds
    worker_busy: float | None = None  # its DataLoader workers' CPU use (0–1 a worker), where seen
    workers_seen: int = 0
    ranks: int = 1  # the job's ranks on this machine (a torchrun job's: each has its own loader)

    @property
    def rate(self) -> Estimate | None:
        """What the race ranks by: samples/s where the job's batches are counted, else steps/s."""
        return self.samples if self.samples is not None and self.samples.mean > 0 else self.steps


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="gpudash tune", description="race the safe settings on your job: gpudash tune [OPTIONS] -- CMD ..."
    )
    p.add_argument("--seconds", type=float, default=30.0, help="each run's length, start-up included (default: 30)")
    p.add_argument("--max-minutes", type=float, default=10.0, help="the race's budget (default: 10)")
    p.add_argument(
        "--out", default="tune", help="the folder for tune.md, tune.csv, tune.png and the runs (default: tune)"
    )
    p.add_argument("--json", action="store_true", help="the answer as JSON on stdout")
    p.add_argument("--diff", action="store_true", help="print the change as a unified diff of your files")
    p.add_argument(
        "--allow-numerics",
        action="store_true",
        help="also race settings that change the numbers: TF32 (CUDA) and bf16 autocast, where the job has none",
    )
    p.add_argument(
        "--allow-compile", action="store_true", help="also race torch.compile of the model the optimizer steps"
    )
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    return p


def _say(quiet: bool, text: str) -> None:
    if not quiet:
        print(f"gpudash: {text}", file=sys.stderr, flush=True)


def run_once(
    command: list[str], settings: Settings, seconds: float, csv_path: Path, beat: Run | None = None, watch: bool = False
) -> Run:
    """The job once, recorded under ``settings``; its figures, or why there are none. Stopped
    early (Ctrl-C, so every row is kept) once half its seconds show it slower than ``beat``;
    ``watch``: its first step says what its model does (autocast, compiled, where it is called)."""
    run = Run(describe(settings), settings)
    argv = [sys.executable, "-m", "gpudash", "record", str(csv_path), "-q", "--force", "--duration", f"{seconds:g}"]
    argv += [arg for k, v in settings for arg in ("--set", f"{k}={v}")]
    err_path = csv_path.with_suffix(".err")
    with open(err_path, "w", encoding="utf-8") as err:
        env = {**os.environ, WATCH_ENV: "1"} if watch else None
        process = subprocess.Popen([*argv, "--", *command], stdout=subprocess.DEVNULL, stderr=err, env=env)
        run.dropped = _watch(process, run, csv_path, seconds, beat)
    if process.returncode != 0 and not run.dropped or not csv_path.exists():
        said = [line for line in err_path.read_text(encoding="utf-8", errors="replace").splitlines() if line.strip()]
        tail = " | ".join(said[-3:])  # the job's own last lines, then gpudash's
        run.error = f"exit {process.returncode}: {tail}" if tail else f"exit {process.returncode}"
        return run
    try:
        recorded = load_run(csv_path)
    except ReportInputError as exc:
        run.error = str(exc)
        return run
    if not _take_rates(run, recorded):
        run.error = "no samples after the warm-up: give each run more --seconds"
        return run
    run.started = dict(recorded.meta.get("started") or {})
    run.ranks = len({r.rank for r in recorded.ranks}) or 1
    return run


def _watch(process: subprocess.Popen[bytes], run: Run, csv_path: Path, seconds: float, beat: Run | None) -> bool:
    """Wait for ``process``, reading its workers' CPU use each second; True where it was stopped
    early for being slower than ``beat``."""
    workers = WorkerCpu(process.pid)
    began, dropped = time.monotonic(), False
    while process.poll() is None:
        time.sleep(1.0)
        workers.read()
        elapsed = time.monotonic() - began
        if elapsed > seconds + 300:
            process.kill()
        elif not dropped and beat is not None and elapsed >= seconds / 2 and _losing(csv_path, beat):
            process.send_signal(signal.SIGINT)
            dropped = True
    run.worker_busy, run.workers_seen = workers.busy, workers.count
    return dropped


def _losing(csv_path: Path, beat: Run) -> bool:
    """Whether the recording so far is slower than ``beat`` beyond the noise."""
    try:
        recorded = load_run(csv_path)
    except (ReportInputError, OSError):
        return False
    so_far = Run("so far", ())
    return _take_rates(so_far, recorded) and _slower(beat, so_far)


def _take_rates(run: Run, recorded: Recorded) -> bool:
    """``run``'s samples/s and steps/s: its recording's last configuration after the warm-up
    (False where there is none yet)."""
    figures = [c for c in recorded.configs if c.steps is not None]
    if figures:
        run.samples, run.steps = figures[-1].stats.get("samples_per_s"), figures[-1].stats.get("steps_per_s")
    return bool(figures)


def _faster(best: Run, new: Run) -> Comparison | None:
    """``new`` against ``best`` where it is faster by ``KEEP_FROM`` at its interval's low end: two
    runs differ more from one another than each one's windows do, which its interval counts."""
    if best.rate is None or new.rate is None:
        return None
    c = compare(best.rate, new.rate)
    return c if c.verdict == Verdict.FASTER and (c.low or 0.0) >= KEEP_FROM else None


def _slower(best: Run, new: Run) -> bool:
    """``new`` is slower than ``best`` beyond the noise (False where either has no figure)."""
    if best.rate is None or new.rate is None:
        return False
    return compare(best.rate, new.rate).verdict == Verdict.SLOWER


WAITING_BELOW = 0.5  # workers that use less than this share of a CPU each mostly wait (reads, not work)


def waiting(run: Run) -> bool:
    """Whether ``run``'s DataLoader workers mostly waited rather than computed."""
    return run.worker_busy is not None and run.worker_busy < WAITING_BELOW


def computing(run: Run, cpus: int) -> str:
    """Why the climb stops at the CPUs."""
    if run.worker_busy is None:
        return "no worker was seen at the best count"
    return f"its workers use {run.worker_busy:.0%} of a CPU each, so more than {cpus} would only share them"


def shown(run: Run) -> str:
    """A run's progress line: its rate and its workers' CPU use, or its error."""
    if run.rate is None:
        return run.error
    unit = "samples" if run.rate is run.samples else "steps"
    busy = f", workers {run.worker_busy:.0%} busy" if run.worker_busy is not None else ""
    return f"{run.rate.mean:.4g} {unit}/s{busy}" + (" (dropped early: slower)" if run.dropped else "")


def worker_ladder(now: int, cpus: int) -> list[int]:
    """The worker counts to climb past ``now``: powers of two up to four times the CPUs (past
    the CPUs only while the workers mostly wait: ``JobRace.climb``)."""
    out, n = [], 1
    while n <= 4 * cpus:
        if n > now:
            out.append(n)
        n *= 2
    return out


def _have(started: dict[str, Any]) -> dict[str, str]:
    """What the job as written does (its training DataLoader's arguments and site, its flags)."""
    return job_settings(str(started.get("settings") or ""))


class JobRace:
    """One race: ``runs`` in the order run, the budget's deadline, the scratch folder."""

    def __init__(self, command: list[str], args: argparse.Namespace, out: Path) -> None:
        self.command, self.args, self.out = command, args, out
        self.runs: list[Run] = []
        self.deadline = time.monotonic() + 60.0 * args.max_minutes
        self.on_cuda = False

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
            if run is not None and _faster(best, run) is not None:
                best = run
        return base, best

    def climb(self, base: Run, have: dict[str, str], site: Settings) -> Run:
        """The worker count, climbed in powers of two while faster: up to this machine's CPUs a
        rank, and past them while the workers mostly wait (under half a CPU each: the best count's,
        or the latest count's where the best has none)."""
        cpus = max(len(os.sched_getaffinity(0)) // max(self.ranks, 1), 1)
        best, stale = base, 0  # counts in a row that were not faster: one worker may be slower than none
        for workers in worker_ladder(int(have["num_workers"] or 0), cpus):
            seen = next((r for r in (best, *reversed(self.runs)) if r.worker_busy is not None), best)
            if workers > cpus and not waiting(seen):  # (the workers' use: the best count's, else the latest)
                _say(self.args.quiet, f"num_workers past {cpus}: not tried: {computing(seen, cpus)}")
                break
            run = self.measure((("num_workers", str(workers)), *site), beat=best)
            if run is None:
                break  # the budget is spent
            best, stale = (run, 0) if _faster(best, run) is not None else (best, stale + 1)
            if stale >= 2 or (best is not base and _slower(best, run)):
                break  # two counts in a row no faster, or past the peak
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


def _lines(mark: str, text: str) -> str:
    return "".join(f"{mark}{line}\n" for line in text.splitlines())


def _interval(e: Estimate | None) -> str:
    if e is None:
        return "–"
    return f"{e.mean:.4g} [{e.low:.4g}–{e.high:.4g}]" if e.low is not None and e.high is not None else f"{e.mean:.4g}"


def _estimate(e: Estimate | None) -> dict[str, float | None] | None:
    return None if e is None else {"mean": e.mean, "low": e.low, "high": e.high}


def notes(have: dict[str, str], base: Run, winner: Run) -> list[str]:
    """What the winner changes beyond the speed: a Dataset's random draws under workers, the numbers."""
    out = []
    workers = dict(winner.settings).get("num_workers")
    if have.get("draws") == "True" and workers is not None and workers != have.get("num_workers"):
        out.append(
            "the job's Dataset draws random numbers for each sample: with workers each worker draws from its "
            "own seed, so the job's numbers differ in those draws only"
        )
    changed = [k for k in ("tf32", "autocast", "compile") if k in dict(winner.settings)]
    if changed:
        out.append(f"{', '.join(changed)} change the numbers the job computes: compare its loss with the job's own")
    return out


def answer(base: Run, winner: Run, runs: list[Run], edits: list[job_edits.Edit]) -> dict[str, Any]:
    """``--json``'s document."""
    c = compare(base.rate, winner.rate) if base.rate and winner.rate else None
    speedup = {"mean": c.ratio, "low": c.low, "high": c.high, "verdict": str(c.verdict)} if c else None

    def side(r: Run) -> dict[str, Any]:
        return {"settings": dict(r.settings), "steps_per_s": _estimate(r.steps), "samples_per_s": _estimate(r.samples)}

    candidates = [
        {**side(r), "name": r.name, "error": r.error, "dropped_early": r.dropped, "worker_busy": r.worker_busy}
        for r in runs
    ]
    edited = [e.as_dict() for e in edits]  # (keyword names: "baseline" is a family's variant too)
    return dict(baseline=side(base), winner=side(winner), speedup=speedup, edits=edited, candidates=candidates)


def write_files(out: Path, command: list[str], runs: list[Run], doc: dict[str, Any], sentence: str) -> list[str]:
    """tune.md and tune.csv (one row a run) in ``out``."""
    import csv

    with open(out / "tune.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["candidate", "samples_per_s", "ci_low", "ci_high", "steps_per_s", "error"])
        for r in runs:
            s = r.samples
            w.writerow([r.name, *(("" if s is None else f"{v:.6g}" if v is not None else "") for v in
                                  (s.mean if s else None, s.low if s else None, s.high if s else None)),
                        f"{r.steps.mean:.6g}" if r.steps else "", r.error])  # fmt: skip
    rows = [f"| {r.name} | {_interval(r.rate)} | {r.error} |" for r in runs]
    edits = [
        f"`{e['file']}`, line {e['line']}:\n\n```diff\n{_lines('-', e['before'])}{_lines('+', e['after'])}```\n"
        for e in doc["edits"]
    ]
    text = "\n".join(
        [
            "# gpudash tune: your job",
            "",
            f"- **Command:** `{' '.join(command)}`",
            f"- **Answer:** {sentence}",
            *(f"- **Note:** {note}" for note in doc["notes"]),
            "",
            "| candidate | rate (95% interval) | error |",
            "|---|---|---|",
            *rows,
            "",
            "## The change",
            "",
            *(edits or ["- none: the job as written is as fast as any candidate measured"]),
            "",
        ]
    )
    (out / "tune.md").write_text(text, encoding="utf-8")
    return ["tune.md", "tune.csv", *_draw(out, runs, doc)]


def _draw(out: Path, runs: list[Run], doc: dict[str, Any]) -> list[str]:
    """tune.png and tune.svg: each run's rate with its interval, fastest on top, the winner in colour."""
    from gpudash.tune.plot import Bar, plot

    winner = doc["winner"]["settings"]
    measured = [r for r in runs if r.rate is not None]
    ranked = sorted(measured, key=lambda r: r.rate.mean if r.rate else 0.0, reverse=True)
    bars = [Bar(r.name, r.rate, "winner" if dict(r.settings) == winner else "dropped") for r in ranked if r.rate]
    return [path.name for path in plot(bars, out, "gpudash tune: your job's settings")] if bars else []


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
    cpus = len(os.sched_getaffinity(0))
    ladder = worker_ladder(0, cpus)
    planned = 1 + len([n for n in ladder if n <= cpus]) + 2 + 2 * args.allow_numerics + args.allow_compile
    most = planned + len([n for n in ladder if n > cpus])  # past the CPUs while the workers mostly wait
    minutes = planned * (args.seconds + START_S) / 60
    past = f", up to {most} where the workers mostly wait" if most > planned else ""
    _say(args.quiet, f"racing your job: about {planned} runs of {args.seconds:g} s{past} (about {minutes:.0f} "
                     f"min, at most {args.max_minutes:g})")  # fmt: skip
    race = JobRace(command, args, out)
    try:
        base, winner = race.race()
    except RuntimeError as exc:
        print(f"gpudash: error: {exc}", file=sys.stderr)
        return ExitCode.FAILED
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
    doc = {**answer(base, winner, race.runs, edits), "notes": notes(have, base, winner)}
    written = write_files(out, command, race.runs, doc, sentence)
    if args.json:
        print(json.dumps(doc, indent=2))
    elif not args.quiet:
        print("\n".join([sentence, *(f"note: {n}" for n in doc["notes"])]))
        for e in edits:
            print(f"  {e.file}:{e.line}: {e.before.strip()}  →  {e.after.strip()}")
    if args.diff:
        sys.stdout.write(job_edits.unified_diff(edits))
    _say(args.quiet, f"wrote {', '.join(written)} in {out}")
    return ExitCode.OK
