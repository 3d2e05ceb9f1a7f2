"""What watching a job costs it, and whether gpudash counts what the job counts: a user's script
run bare and under ``gpudash record CSV -- python SCRIPT``, in interleaved pairs.

    python benchmarks/job_overhead.py                       # both jobs, 4 pairs each (needs CUDA)
    python benchmarks/job_overhead.py --job small --pairs 6
    python benchmarks/job_overhead.py --job small --pairs 12 --job-cpus 2-5 --steps 2000
    python benchmarks/job_overhead.py --tiny                # the small job on the CPU, a few steps
    python benchmarks/job_overhead.py --job ddp_resnet --pairs 6   # torchrun, 2 ranks (needs 2 GPUs)

The jobs (``benchmarks/jobs/``): ``resnet`` — torchvision ResNet-50, batch 256, bf16 autocast,
channels_last; ``small`` — an MLP over a DataLoader whose step takes a few milliseconds;
``ddp_resnet`` — the same ResNet-50 at 128 images per rank in DistributedDataParallel (100 MB
buckets, bucket views, a static graph) on 2 ranks, run as ``python -m torch.distributed.run
--nproc-per-node 2`` (held out: gpudash sees a user's torchrun job, and counts the world). Each
prints its own samples/s over its steps after a warm-up (synchronized at both ends) on its last
line. Each pair runs the job bare and under gpudash, in a shuffled order. ``--job-cpus`` pins the
job to those CPUs in both arms (``taskset -c``, inside gpudash's command line: ``gpudash record
CSV -- taskset -c CPUS python SCRIPT``) and gpudash itself to the others, so that where the
scheduler puts a host-bound job does not move its speed from one process to the next.

Prints, per job: the job's own samples/s bare and under gpudash, the slowdown (bare over hooked,
the geometric mean of the pairs with its 95% interval; target ≤ 1.01) and its verdict; then the
match: gpudash's samples/s over the same stretch (from its CSV: the cumulative samples between
the end of the first window past the job's warm-up and the end of the last full window) against the job's
own under gpudash (target within 2%), and the step counts (gpudash's last against the job's).
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.step_timing_cost import paired_interval  # noqa: E402

JOBS = Path(__file__).resolve().parent / "jobs"
ARGS = {
    "resnet": ["--steps", "200", "--warmup", "30"],
    "small": ["--steps", "3000", "--warmup", "300", "--width", "8192"],
    "ddp_resnet": ["--steps", "400", "--warmup", "30", "--tuned", "--bucket-mb", "100"],
}
LAUNCH = {"ddp_resnet": ["-m", "torch.distributed.run", "--nproc-per-node", "2"]}  # how a job is started
TINY = ["--steps", "1200", "--warmup", "120", "--width", "32", "--batch", "32"]
SLOWDOWN_TARGET, MATCH_TARGET_PCT = 1.01, 2.0


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--job", choices=["resnet", "small", "ddp_resnet", "both"], default="both")
    p.add_argument("--pairs", type=int, default=4, help="interleaved pairs per job (default: 4)")
    p.add_argument("--steps", type=int, help="the job's steps per run (default: the job's own setting)")
    p.add_argument("--job-cpus", metavar="LIST", help="pin the job to these CPUs (taskset's list, e.g. 2-5)")
    p.add_argument("--tiny", action="store_true", help="the small job on the CPU, a few steps, 2 pairs")
    return p.parse_args()


def cpu_list(text: str) -> set[int]:
    """taskset's list syntax (``2-5,8``) as a set of CPU numbers."""
    cpus: set[int] = set()
    try:
        for part in text.split(","):
            lo, _, hi = part.partition("-")
            cpus.update(range(int(lo), int(hi or lo) + 1))
    except ValueError:
        raise SystemExit(f"--job-cpus {text}: not a CPU list (e.g. 2-5 or 2,3,8)") from None
    return cpus


def pinning(job_cpus: str | None) -> tuple[list[str], set[int] | None]:
    """The prefix that pins the job, and the CPUs left for gpudash (None: no pinning)."""
    if job_cpus is None:
        return [], None
    if shutil.which("taskset") is None:
        raise SystemExit("--job-cpus needs taskset (util-linux)")
    mine = cpu_list(job_cpus)
    rest = os.sched_getaffinity(0) - mine
    if not mine <= os.sched_getaffinity(0) or not rest:
        raise SystemExit(f"--job-cpus {job_cpus}: not a strict subset of this process's CPUs")
    return ["taskset", "-c", job_cpus], rest


def own_line(stdout: str) -> dict[str, float]:
    """The job's last line, ``JOB steps=... samples_per_s=...``, as numbers (a data-parallel job's
    ``world_samples_per_s`` as its ``samples_per_s``)."""
    line = [x for x in stdout.splitlines() if x.startswith("JOB ")][-1]
    got = {k: float(v) for k, v in (part.split("=", 1) for part in line.split()[1:])}
    if "world_samples_per_s" in got:
        got["samples_per_s"] = got["world_samples_per_s"]
    return got


def run_job(
    script: Path, args: list[str], under: Path | None, pin: tuple[list[str], set[int] | None] = ([], None)
) -> tuple[dict[str, float], list[dict[str, str]]]:
    """One run: bare, or under gpudash recording to ``under``; the job's figures and gpudash's rows.
    ``pin``: the job's CPU prefix and gpudash's own CPUs (see ``pinning``)."""
    prefix, gpudash_cpus = pin
    job = [*prefix, sys.executable, *LAUNCH.get(script.stem.removesuffix("_job"), []), str(script), *args]
    keep_off = ["taskset", "-c", ",".join(map(str, sorted(gpudash_cpus)))] if gpudash_cpus else []
    gpudash = [*keep_off, sys.executable, "-m", "gpudash", "record", str(under), "-q", "--force", "--"]
    argv = [*gpudash, *job] if under else job
    done = subprocess.run(argv, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr[-2000:]}")
    rows: list[dict[str, str]] = []
    if under is not None:
        with open(under, newline="") as f:
            rows = [r for r in csv.DictReader(f) if r["row_kind"] == "sample"]
    return own_line(done.stdout), rows


def gpudash_rates(rows: list[dict[str, str]], warmup: int, last: int) -> tuple[float, float]:
    """gpudash's steps/s and samples/s from its windows: from the end of the first window past the
    job's warm-up to the end of the last window before the one that holds its last step (a full one)."""
    steps = [int(r["steps"]) for r in rows]
    a = next(i for i, s in enumerate(steps) if s > warmup)
    b = next(i for i, s in enumerate(steps) if s >= last) - 1  # the last full window
    if b <= a:
        raise SystemExit(f"the job's timed steps fit in one of gpudash's windows: give it more --steps ({last})")
    first, end = rows[a], rows[b]
    seconds = float(end["time_s"]) - float(first["time_s"])
    return (steps[b] - steps[a]) / seconds, (int(end["samples"]) - int(first["samples"])) / seconds


def measure(
    name: str, args: list[str], pairs: int, pin: tuple[list[str], set[int] | None] = ([], None)
) -> dict[str, list[float]]:
    """``pairs`` interleaved pairs of one job: the job's rates, gpudash's, and the step counts."""
    script = JOBS / f"{name}_job.py"
    warmup = int(args[args.index("--warmup") + 1])
    out: dict[str, list[float]] = {name: [] for name in ("bare", "hooked", "gpudash", "hooked_steps_s")}
    out.update({name: [] for name in ("gpudash_steps_s", "steps_job", "steps_gpudash")})
    order = random.Random(1)
    with tempfile.TemporaryDirectory() as scratch:
        csv_path = Path(scratch) / "run.csv"
        for pair in range(1, pairs + 1):
            for setting in order.sample(["bare", "hooked"], 2):
                own, rows = run_job(script, args, csv_path if setting == "hooked" else None, pin)
                out[setting].append(own["samples_per_s"])
                stamp = f"{dt.datetime.now():%H:%M:%S}"
                print(f"{stamp} {name} pair {pair} {setting}: {own}", file=sys.stderr)  # kept if the run is cut short
                if setting == "hooked":
                    steps_s, samples_s = gpudash_rates(rows, warmup, int(own["steps"]))
                    out["gpudash"].append(samples_s)
                    out["gpudash_steps_s"].append(steps_s)
                    out["hooked_steps_s"].append(own["timed_steps"] / own["seconds"])
                    out["steps_job"].append(own["steps"])
                    out["steps_gpudash"].append(float(rows[-1]["steps"]))
    return out


def with_steps(args: list[str], steps: int | None) -> list[str]:
    """A job's arguments with ``--steps`` replaced (None: as they are)."""
    if steps is None:
        return args
    warmup = int(args[args.index("--warmup") + 1])
    if steps <= 2 * warmup:
        raise SystemExit(f"--steps {steps}: give the job more than twice its warm-up ({warmup})")
    out = list(args)
    out[out.index("--steps") + 1] = str(steps)
    return out


def print_tables(results: dict[str, dict[str, list[float]]], device: str, job_cpus: str | None) -> None:
    import torch

    now = dt.datetime.now().astimezone().isoformat(timespec="seconds")
    print(f"# job overhead on {device}; torch {torch.__version__}, python {platform.python_version()}, {now}")
    print(f"# `{' '.join(sys.argv)}`; the job pinned to CPUs {job_cpus}" if job_cpus else f"# `{' '.join(sys.argv)}`")
    print("| job | pairs | bare samples/s | under gpudash | slowdown (95% CI) | verdict |")
    print("|---|--:|--:|--:|---|---|")
    for name, r in results.items():
        mean, lo, hi = paired_interval(r["bare"], r["hooked"])
        verdict = "slower" if lo > 1.0 else "faster" if hi < 1.0 else "no change detected"
        met = "met" if hi <= SLOWDOWN_TARGET else "not shown"
        print(
            f"| {name} | {len(r['bare'])} | {statistics.mean(r['bare']):.1f} | {statistics.mean(r['hooked']):.1f} "
            f"| {mean:.4f}× [{lo:.4f}–{hi:.4f}] | {verdict} (target ≤ {SLOWDOWN_TARGET}: {met}) |"
        )
    print()
    print("| job | pair | bare samples/s | under gpudash | bare over hooked |")
    print("|---|--:|--:|--:|--:|")
    for name, r in results.items():
        for i, (bare, hooked) in enumerate(zip(r["bare"], r["hooked"], strict=True)):
            print(f"| {name} | {i + 1} | {bare:.1f} | {hooked:.1f} | {bare / hooked:.4f} |")
    print()
    print("| job | run | figure | the job's own | gpudash's | difference | steps: job / gpudash |")
    print("|---|--:|---|--:|--:|--:|---|")
    for name, r in results.items():
        for i in range(len(r["hooked"])):
            steps = f"{r['steps_job'][i]:.0f} / {r['steps_gpudash'][i]:.0f}"
            for figure, own, seen in (
                ("steps/s", r["hooked_steps_s"][i], r["gpudash_steps_s"][i]),
                ("samples/s", r["hooked"][i], r["gpudash"][i]),
            ):
                pct = 100.0 * (seen - own) / own
                ok = f"{'within' if abs(pct) <= MATCH_TARGET_PCT else 'OUTSIDE'} ±{MATCH_TARGET_PCT:g}%"
                print(f"| {name} | {i + 1} | {figure} | {own:.2f} | {seen:.2f} | {pct:+.2f}% ({ok}) | {steps} |")


def main() -> int:
    args = parse_args()
    import torch

    pin = pinning(args.job_cpus)
    if args.tiny:
        results = {"small": measure("small", with_steps(TINY, args.steps), 2, pin)}
        print_tables(results, "cpu", args.job_cpus)
        return 0
    if not torch.cuda.is_available():
        print("job_overhead.py needs CUDA (--tiny runs on the CPU)", file=sys.stderr)
        return 2
    names = ["resnet", "small"] if args.job == "both" else [args.job]
    results = {name: measure(name, with_steps(ARGS[name], args.steps), args.pairs, pin) for name in names}
    print_tables(results, torch.cuda.get_device_name(), args.job_cpus)
    return 0


if __name__ == "__main__":
    sys.exit(main())
