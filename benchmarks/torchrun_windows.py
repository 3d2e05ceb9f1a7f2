"""A torchrun job under ``gpudash record --trace-every S``: does every run end 0, what do the
profiler windows cost the job, and do gpudash's figures (its windows' steps left out) match the
job's own bare figure? Also: nothing of gpudash's in the job's output (sync warnings, profiler lines).

    python benchmarks/torchrun_windows.py --nproc 2 --runs 10 --bare 4 --trace-every 5 -- \\
        tests/data/jobs/ddp_resnet.py --steps 400

Runs the job bare ``--bare`` times, under gpudash with windows ``--runs`` times and, with ``--plain
K``, under gpudash without windows K times, interleaved (a bare run, a plain one, then a traced one,
while bare and plain runs last), and prints one table: each run's exit
status, the job's own steps/s (its ranks' mean, from its ``JOB rank=R … steps_per_s=X`` lines),
gpudash's figure for the run, the windows gpudash said it took and their cost, and the lines on
the job's stderr that are not the job's (``[W…] Warning: … synchronizing``, profiler lines). Then
the cost of the windows on the job's own figure (traced over bare, with its interval and verdict:
``gpudash.stats.comparison``) and gpudash's figure over the bare job's; with ``--plain``, the plain
runs over bare too (what gpudash's hooks cost without windows) and traced over plain (the windows'
own cost).
"""

from __future__ import annotations

import argparse
import datetime
import re
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from gpudash.stats.comparison import Comparison, compare, estimate_from_batches  # noqa: E402 - the root first

NOT_THE_JOBS = re.compile(r"synchronizing CUDA operation|profiler_st|USDT:|Profiler clears|gpuGetDeviceCount|CUPTI")


@dataclass
class Run:
    kind: str
    code: int
    job_rate: float | None
    gpudash_rate: str
    windows: int
    cost: str
    foreign: int


def described(base: list[float], new: list[float]) -> str:
    """new over base: ratio, 95% interval, verdict (each run one value)."""
    c: Comparison = compare(estimate_from_batches(base), estimate_from_batches(new))
    interval = f" [{c.low:.3f}–{c.high:.3f}]" if c.low is not None and c.high is not None else ""
    return f"{c.ratio:.3f}×{interval} ({c.verdict}; {len(new)} runs against {len(base)})"


def job_rate(text: str) -> float | None:
    rates = [float(m) for m in re.findall(r"JOB rank=\d+ steps=\d+ steps_per_s=([\d.]+)", text)]
    return statistics.fmean(rates) if rates else None


def one(kind: str, command: list[str], out: Path) -> Run:
    done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    (out / f"{kind}.log").open("a").write(f"$ {' '.join(command)}\n{done.stdout}\n{done.stderr}\n")
    text = done.stdout + done.stderr
    figure = re.search(r"steps/s ([\d.,]+ ± [\d.,]+)", done.stderr)
    costs = re.findall(r"the window cost the job ([\d.,]+) s", done.stderr)
    foreign = sum(1 for line in done.stderr.splitlines() if NOT_THE_JOBS.search(line))
    cost = f"{sum(float(c.replace(',', '')) for c in costs):.2f} s" if costs else ""
    return Run(kind, done.returncode, job_rate(text), figure.group(1) if figure else "", len(costs), cost, foreign)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nproc", type=int, default=2)
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--bare", type=int, default=4)
    p.add_argument("--plain", type=int, default=0, help="runs under gpudash record without windows")
    p.add_argument("--trace-every", type=float, default=5.0)
    p.add_argument("--out", default="")
    p.add_argument("job", nargs=argparse.REMAINDER)
    args = p.parse_args()
    job = [a for a in args.job if a != "--"]
    out = Path(args.out or tempfile.mkdtemp(prefix="torchrun-windows-"))
    out.mkdir(parents=True, exist_ok=True)
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(args.nproc), *job]
    runs: list[Run] = []
    record = [sys.executable, "-m", "gpudash", "record"]
    left = {"bare": args.bare, "plain": args.plain}
    for i in range(args.runs):
        for kind in ("bare", "plain"):
            every = max(1, args.runs // max(1, getattr(args, kind)))
            if left[kind] and i % every == 0:
                command = [*record, str(out / f"plain{i}.csv"), "--force", "--", *torchrun]
                runs.append(one(kind, torchrun if kind == "bare" else command, out))
                left[kind] -= 1
        traced_command = [*record, str(out / f"run{i}.csv"), "--force", "--trace-every", str(args.trace_every)]
        runs.append(one("traced", [*traced_command, "--", *torchrun], out))
    for kind, count in left.items():
        for j in range(count):
            command = [*record, str(out / f"plain-last{j}.csv"), "--force", "--", *torchrun]
            runs.append(one(kind, torchrun if kind == "bare" else command, out))
    import torch

    print(f"# torchrun jobs under gpudash record --trace-every {args.trace_every:g}")
    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "CPU (gloo)"
    print(f"{datetime.date.today()} · torch {torch.__version__} · {device} × {args.nproc}")
    print(f"job: {' '.join(job)}\n")
    print("| run | exit | job's own steps/s | gpudash's steps/s | windows | their cost | lines not the job's |")
    print("|---|---|---|---|---|---|---|")
    for r in runs:
        rate = f"{r.job_rate:.2f}" if r.job_rate is not None else "–"
        cells = [r.kind, str(r.code), rate, r.gpudash_rate or "–", str(r.windows), r.cost or "–", str(r.foreign)]
        print("| " + " | ".join(cells) + " |")
    bare = [r.job_rate for r in runs if r.kind == "bare" and r.job_rate]
    traced = [r.job_rate for r in runs if r.kind == "traced" and r.job_rate]
    ended = sum(1 for r in runs if r.kind == "traced" and r.code == 0)
    print(f"\ntraced runs that ended 0: {ended} of {sum(1 for r in runs if r.kind == 'traced')}")
    if len(bare) >= 2 and len(traced) >= 2:
        print(f"the job's own steps/s, traced over bare: {described(bare, traced)}")
    plain_rates = [r.job_rate for r in runs if r.kind == "plain" and r.job_rate]
    if len(bare) >= 2 and len(plain_rates) >= 2:
        print(f"the job's own steps/s, under gpudash without windows over bare: {described(bare, plain_rates)}")
    if len(plain_rates) >= 2 and len(traced) >= 2:
        print(f"the job's own steps/s, traced over under gpudash without windows: {described(plain_rates, traced)}")
    figures = [r.gpudash_rate for r in runs if r.gpudash_rate and r.kind == "traced"]
    ours = [float(f.split(" ±")[0].replace(",", "")) for f in figures]
    if len(bare) >= 2 and len(ours) >= 2:
        print(f"gpudash's figure (windows left out) over the bare job's own: {described(bare, ours)}")
    print(f"logs: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
