"""A job of ``benchmarks/jobs/`` run once, bare or under ``gpudash record`` (``job_overhead``): its
own figures from its last ``JOB …`` line, and gpudash's rows and rates from its CSV."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.cases.shared.gpudash_outputs import gpudash_argv, rows
from benchmarks.harness.case import BadParameter

JOBS = Path(__file__).resolve().parents[2] / "jobs"
ARGS = {  # each job's own arguments
    "resnet": ["--steps", "200", "--warmup", "30"],
    "small": ["--steps", "3000", "--warmup", "300", "--width", "8192"],
    "ddp_resnet": ["--steps", "400", "--warmup", "30", "--tuned", "--bucket-mb", "100"],
    "compiled_resnet": ["--steps", "250", "--warmup", "80", "--compile"],  # inductor: compiled in its first steps
}
SCRIPTS = {"compiled_resnet": "resnet_job.py"}  # a job that is another's script with other arguments
LAUNCH = {"ddp_resnet": ["-m", "torch.distributed.run", "--nproc-per-node", "2"]}  # how a job is started
TINY = ["--steps", "1200", "--warmup", "120", "--width", "32", "--batch", "32"]  # the small job, on the CPU


def job_args(name: str, steps: int | None, tiny: bool) -> list[str]:
    """A job's arguments, ``--steps`` replaced (None: as they are); ``tiny``: the small job's tiny shape."""
    if name not in ARGS:
        raise BadParameter(f"no job {name!r}; the jobs: {', '.join(ARGS)}")
    args = list(TINY if tiny else ARGS[name])
    if steps is None:
        return args
    warmup = int(args[args.index("--warmup") + 1])
    if steps <= 2 * warmup:
        raise BadParameter(f"steps {steps}: give the job more than twice its warm-up ({warmup})")
    args[args.index("--steps") + 1] = str(steps)
    return args


def own_line(stdout: str) -> dict[str, float]:
    """The job's last line, ``JOB steps=... samples_per_s=...``, as numbers (a data-parallel job's
    ``world_samples_per_s`` as its ``samples_per_s``)."""
    line = [x for x in stdout.splitlines() if x.startswith("JOB ")][-1]
    got = {k: float(v) for k, v in (part.split("=", 1) for part in line.split()[1:])}
    if "world_samples_per_s" in got:
        got["samples_per_s"] = got["world_samples_per_s"]
    return got


@dataclass
class JobRun:
    """One run of a job: its own figures, and gpudash's sample rows (none when bare)."""

    own: dict[str, float]
    rows: list[dict[str, Any]] = field(default_factory=list)

    def gpudash_rates(self, warmup: int) -> tuple[float, float]:
        """gpudash's steps/s and samples/s from its windows: from the end of the first window past
        the job's warm-up to the end of the last full window before the job's last step."""
        steps = [int(r["steps"]) for r in self.rows]
        last = int(self.own["steps"])
        a = next(i for i, s in enumerate(steps) if s > warmup)
        b = next(i for i, s in enumerate(steps) if s >= last) - 1  # the last full window
        if b <= a:
            raise RuntimeError(f"the job's timed steps fit in one of gpudash's windows: give it more steps ({last})")
        first, end = self.rows[a], self.rows[b]
        seconds = float(end["time_s"]) - float(first["time_s"])
        return (steps[b] - steps[a]) / seconds, (int(end["samples"]) - int(first["samples"])) / seconds


def run_job(name: str, args: list[str], under: Path | None, pin: tuple[list[str], set[int] | None]) -> JobRun:
    """One run of job ``name``: bare, or under gpudash recording to ``under``. ``pin``: the job's
    CPU prefix and gpudash's own CPUs."""
    prefix, gpudash_cpus = pin
    job = [*prefix, sys.executable, *LAUNCH.get(name, []), str(JOBS / SCRIPTS.get(name, f"{name}_job.py")), *args]
    keep_off = ["taskset", "-c", ",".join(map(str, sorted(gpudash_cpus)))] if gpudash_cpus else []
    gpudash = [*keep_off, *gpudash_argv("record", str(under), "-q", "--force", "--")]
    argv = [*gpudash, *job] if under else job
    done = subprocess.run(argv, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr[-2000:]}")
    return JobRun(own_line(done.stdout), rows(under) if under is not None else [])
