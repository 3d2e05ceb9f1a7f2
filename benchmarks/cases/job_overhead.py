"""What watching a job costs it, and whether gpudash counts what the job counts: a user's script run
bare and under ``gpudash record CSV -- python SCRIPT``, in pairs.

The jobs (``benchmarks/jobs/``): ``resnet``, torchvision ResNet-50 at batch 256, bf16 autocast,
channels_last; ``small``, an MLP over a DataLoader whose step takes a few milliseconds;
``ddp_resnet``, the same ResNet-50 at 128 images per rank in DistributedDataParallel on 2 ranks,
run as ``python -m torch.distributed.run --nproc-per-node 2`` (held out: gpudash sees a user's
torchrun job, and counts the world). Each prints its own samples/s over its steps after a warm-up
on its last line. Each pair runs the job bare and under gpudash in a shuffled order. ``job_cpus``
pins the job to those CPUs in both arms (``taskset -c``, inside gpudash's command line) and gpudash
itself to the others, so that where the scheduler puts a host-bound job does not move its speed.
Then the match: gpudash's samples/s over the same stretch (from its CSV) against the job's own
under gpudash (the goal: within 2%), and the step counts."""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
from dataclasses import dataclass
from pathlib import Path

from benchmarks.cases.shared.jobs import ARGS, job_args, run_job
from benchmarks.harness.case import Unavailable
from benchmarks.harness.context import Run
from benchmarks.harness.params import param
from benchmarks.harness.schedule import Schedule, rounds
from benchmarks.harness.stats import Target, ratio, ratio_text

GOAL = Target(1.01, at_least=False)  # bare over hooked: at most 1% slower under gpudash
MATCH_PCT = 2.0


@dataclass(frozen=True)
class Params:
    jobs: tuple[str, ...] = param(("resnet", "small"), f"the jobs: {', '.join(ARGS)}")
    pairs: int = param(4, "pairs a job")
    steps: int | None = param(None, "the job's steps a run (none: the job's own setting)")
    job_cpus: str | None = param(None, "pin the job to these CPUs (taskset's list, e.g. 2-5)")
    tiny: bool = param(False, "the jobs' tiny shape (the small job on the CPU: a few steps)")


def cpu_list(text: str) -> set[int]:
    """taskset's list syntax (``2-5,8``) as a set of CPU numbers."""
    cpus: set[int] = set()
    try:
        for part in text.split(","):
            lo, _, hi = part.partition("-")
            cpus.update(range(int(lo), int(hi or lo) + 1))
    except ValueError:
        raise Unavailable(f"job_cpus {text}: not a CPU list (e.g. 2-5 or 2,3,8)") from None
    return cpus


def pinning(job_cpus: str | None) -> tuple[list[str], set[int] | None]:
    """The prefix that pins the job, and the CPUs left for gpudash (None: no pinning)."""
    if job_cpus is None:
        return [], None
    if shutil.which("taskset") is None:
        raise Unavailable("job_cpus needs taskset (util-linux)")
    mine, allowed = cpu_list(job_cpus), os.sched_getaffinity(0)
    if not mine <= allowed or not allowed - mine:
        raise Unavailable(f"job_cpus {job_cpus}: not a strict subset of this process's CPUs")
    return ["taskset", "-c", job_cpus], allowed - mine


def measure_job(run: Run, name: str, args: list[str], pin: tuple[list[str], set[int] | None]) -> dict[str, list[float]]:
    """``pairs`` pairs of one job: the job's rates bare and under gpudash, gpudash's, the step counts."""
    warmup = int(args[args.index("--warmup") + 1])
    out: dict[str, list[float]] = {
        k: [] for k in ("gpudash", "hooked_steps_s", "gpudash_steps_s", "steps_job", "steps_gpudash")
    }
    with tempfile.TemporaryDirectory() as scratch:
        csv_path = Path(scratch) / "run.csv"

        def bare() -> float:
            return run_job(name, args, None, pin).own["samples_per_s"]

        def hooked() -> float:
            got = run_job(name, args, csv_path, pin)
            steps_s, samples_s = got.gpudash_rates(warmup)
            out["gpudash"].append(samples_s)
            out["gpudash_steps_s"].append(steps_s)
            out["hooked_steps_s"].append(got.own["timed_steps"] / got.own["seconds"])
            out["steps_job"].append(got.own["steps"])
            out["steps_gpudash"].append(float(got.rows[-1]["steps"]))
            return got.own["samples_per_s"]

        def said(i: int, got: dict[str, float]) -> None:
            run.progress(f"{name} pair {i + 1}: {got}")  # kept if the run is cut short

        got = rounds({"bare": bare, "hooked": hooked}, run.params.pairs, Schedule.PAIRS, seed=1, each=said)
    return {**got, **out}


def measure(run: Run, p: Params) -> None:
    import torch

    if not p.tiny and not torch.cuda.is_available():
        raise Unavailable("needs CUDA (-p tiny=true runs the small job on the CPU)")
    run.device = "cpu" if p.tiny else "cuda"
    pin = pinning(p.job_cpus)
    results = {name: measure_job(run, name, job_args(name, p.steps, p.tiny), pin) for name in p.jobs}
    run.comment(f"job overhead; the job pinned to CPUs {p.job_cpus}" if p.job_cpus else "job overhead")
    tables(run, results)


def tables(run: Run, results: dict[str, dict[str, list[float]]]) -> None:
    """The slowdown of each job, its pairs, and gpudash's figures against the job's own."""
    table = run.table(
        ["job", "pairs", "bare samples/s", "under gpudash", "slowdown (95% CI)", "verdict"],
        ["---", "--:", "--:", "--:", "---", "---"],
    )
    for name, r in results.items():
        run.values(f"{name}, bare", r["bare"], "samples/s")
        run.values(f"{name}, under gpudash", r["hooked"], "samples/s")
        f = run.keep(
            f"slowdown, {name}", ratio(f"slowdown, {name}", r["hooked"], r["bare"], higher_is_better=False, target=GOAL)
        )
        bare, hooked = f"{statistics.mean(r['bare']):.1f}", f"{statistics.mean(r['hooked']):.1f}"
        said = f"{f.verdict} (target {f.target}: {f.met})"
        run.row(table, name, len(r["bare"]), bare, hooked, ratio_text(f, 4), said)
    run.line()
    pairs = run.table(
        ["job", "pair", "bare samples/s", "under gpudash", "bare over hooked"], ["---", "--:", "--:", "--:", "--:"]
    )
    for name, r in results.items():
        for i, (bare_rate, hooked_rate) in enumerate(zip(r["bare"], r["hooked"], strict=True)):
            run.row(pairs, name, i + 1, f"{bare_rate:.1f}", f"{hooked_rate:.1f}", f"{bare_rate / hooked_rate:.4f}")
    run.line()
    match(run, results)


def match(run: Run, results: dict[str, dict[str, list[float]]]) -> None:
    """gpudash's steps/s and samples/s against the job's own, run by run (the goal: within 2%)."""
    table = run.table(
        ["job", "run", "figure", "the job's own", "gpudash's", "difference", "steps: job / gpudash"],
        ["---", "--:", "---", "--:", "--:", "--:", "---"],
    )
    for name, r in results.items():
        for i in range(len(r["hooked"])):
            steps = f"{r['steps_job'][i]:.0f} / {r['steps_gpudash'][i]:.0f}"
            for figure, own, seen in (
                ("steps/s", r["hooked_steps_s"][i], r["gpudash_steps_s"][i]),
                ("samples/s", r["hooked"][i], r["gpudash"][i]),
            ):
                pct = 100.0 * (seen - own) / own
                ok = f"{'within' if abs(pct) <= MATCH_PCT else 'OUTSIDE'} ±{MATCH_PCT:g}%"
                run.row(table, name, i + 1, figure, f"{own:.2f}", f"{seen:.2f}", f"{pct:+.2f}% ({ok})", steps)
