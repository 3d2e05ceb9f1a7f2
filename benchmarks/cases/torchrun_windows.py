"""A torchrun job under ``gpudash record --trace-every S``: does every run end 0, what do the
profiler windows cost the job, and do gpudash's figures (its windows' steps left out) match the
job's own bare figure? Also: nothing of gpudash's in the job's output (sync warnings, profiler lines).

The job runs bare ``bare`` times, under gpudash with windows ``runs`` times and, with ``plain``,
under gpudash without windows that many times, interleaved (a bare run, a plain one, then a traced
one, while bare and plain runs last). Per run: its exit status, the job's own steps/s (its ranks'
mean, from its ``JOB rank=R … steps_per_s=X`` lines), gpudash's figure, the windows gpudash said it
took, their cost and how much slower a traced step ran than an untraced one, and the lines on the
job's stderr that are not the job's. Then traced over bare (the windows' cost on the job's own
figure), gpudash's figure over the bare job's, and with ``plain`` plain over bare (gpudash's hooks
without windows) and traced over plain. ``earlier`` joins the runs of other calls of the case (a
call's time is short; two pairs of GPUs of one host may run it side by side): their rows are shown
and their series pooled with these."""

from __future__ import annotations

import json
import re
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from benchmarks.cases.shared.gpudash_outputs import gpudash_argv
from benchmarks.harness.case import Unavailable
from benchmarks.harness.context import Run
from benchmarks.harness.params import param
from benchmarks.harness.stats import ratio

NOT_THE_JOBS = re.compile(r"synchronizing CUDA operation|profiler_st|USDT:|Profiler clears|gpuGetDeviceCount|CUPTI")


@dataclass(frozen=True)
class Params:
    job: tuple[str, ...] = param((), "the job's script and its arguments, comma-separated (ddp_resnet.py,--steps,400)")
    nproc: int = param(2, "ranks (torchrun's --nproc-per-node)")
    runs: int = param(10, "runs under gpudash with windows")
    bare: int = param(4, "bare runs")
    plain: int = param(0, "runs under gpudash without windows")
    trace_every: float = param(5.0, "gpudash's --trace-every, seconds")
    out: str | None = param(None, "keep the logs and recordings here (default: a temporary folder)")
    earlier: tuple[str, ...] = param(
        (), "earlier result.json files of this case whose runs join these, comma-separated (one call's time is short)"
    )


@dataclass
class JobRun:
    kind: str
    code: int
    job_rate: float | None
    gpudash_rate: str
    windows: int
    cost: str
    slowed: str
    foreign: int


def job_rate(text: str) -> float | None:
    rates = [float(m) for m in re.findall(r"JOB rank=\d+ steps=\d+ steps_per_s=([\d.]+)", text)]
    return statistics.fmean(rates) if rates else None


def one(kind: str, command: list[str], out: Path) -> JobRun:
    done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    with (out / f"{kind}.log").open("a") as log:
        log.write(f"$ {' '.join(command)}\n{done.stdout}\n{done.stderr}\n")
    figure = re.search(r"steps/s ([\d.,]+ ± [\d.,]+)", done.stderr)
    costs = re.findall(r"the window cost the job ([\d.,]+) s", done.stderr)
    foreign = sum(1 for line in done.stderr.splitlines() if NOT_THE_JOBS.search(line))
    cost = f"{sum(float(c.replace(',', '')) for c in costs):.2f} s" if costs else ""
    slowed = ", ".join(f"{float(s):.2f}×" for s in re.findall(r"a traced step ([\d.]+)× an untraced one", done.stderr))
    rate = job_rate(done.stdout + done.stderr)
    figure_text = figure.group(1) if figure else ""
    return JobRun(kind, done.returncode, rate, figure_text, len(costs), cost, slowed, foreign)


def earlier_rows(path: str) -> list[list[str]]:
    """The rows of an earlier result's table of runs (its kinds, exits and figures)."""
    blocks = json.loads(Path(path).read_text())["blocks"]
    return [list(row) for b in blocks if b.get("table") for row in b["table"]["rows"]]


def all_runs(p: Params, out: Path) -> list[JobRun]:
    """The runs, interleaved: in each of ``runs`` rounds a bare and a plain one while they last, then a traced one."""
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(p.nproc), *p.job]
    record = gpudash_argv("record")
    left = {"bare": p.bare, "plain": p.plain}
    runs: list[JobRun] = []
    for i in range(p.runs):
        for kind in ("bare", "plain"):
            every = max(1, p.runs // max(1, getattr(p, kind)))
            if left[kind] and i % every == 0:
                command = [*record, str(out / f"plain{i}.csv"), "--force", "--", *torchrun]
                runs.append(one(kind, torchrun if kind == "bare" else command, out))
                left[kind] -= 1
        traced = [*record, str(out / f"run{i}.csv"), "--force", "--trace-every", str(p.trace_every)]
        runs.append(one("traced", [*traced, "--", *torchrun], out))
    for kind, count in left.items():
        for j in range(count):
            command = [*record, str(out / f"plain-last{j}.csv"), "--force", "--", *torchrun]
            runs.append(one(kind, torchrun if kind == "bare" else command, out))
    return runs


def measure(run: Run, p: Params) -> None:
    if not p.job:
        raise Unavailable("-p job=SCRIPT,ARG,…: the torchrun job to run")
    out = Path(p.out or tempfile.mkdtemp(prefix="torchrun-windows-"))
    out.mkdir(parents=True, exist_ok=True)
    runs = all_runs(p, out)
    run.comment(f"torchrun jobs under gpudash record --trace-every {p.trace_every:g}, {p.nproc} ranks")
    run.line(f"job: {' '.join(p.job)}")
    run.line()
    columns = ["run", "exit", "job's own steps/s", "gpudash's steps/s", "windows", "their cost", "traced step"]
    table = run.table([*columns, "lines not the job's"])
    rows: list[list[str]] = []
    for row in (row for path in p.earlier for row in earlier_rows(path)):  # earlier calls' runs, as they showed them
        rows.append(row if len(row) == len(table.columns) else [*row[:-1], "–", row[-1]])  # before the traced step's
        run.row(table, *rows[-1])
    for r in runs:
        rate = f"{r.job_rate:.2f}" if r.job_rate is not None else "–"
        cells = [r.kind, r.code, rate, r.gpudash_rate or "–", r.windows, r.cost or "–", r.slowed or "–", r.foreign]
        run.row(table, *cells)
        rows.append([str(c) for c in cells])
    rates = {k: [r.job_rate for r in runs if r.kind == k and r.job_rate] for k in ("bare", "plain", "traced")}
    ours = [
        float(r.gpudash_rate.split(" ±")[0].replace(",", "")) for r in runs if r.gpudash_rate and r.kind == "traced"
    ]
    rates["gpudash"] = ours
    for path in p.earlier:  # the runs of earlier calls: their series join these
        series = json.loads(Path(path).read_text())["series"]
        for kind in rates:
            rates[kind] = [*series.get(kind, {}).get("values", []), *rates[kind]]
        run.line(f"with the runs of {path}")
    ours = rates["gpudash"]
    for kind, values in rates.items():
        run.values(kind, [v for v in values if v is not None], "steps/s")
    run.line()
    traced = [row for row in rows if row[0] == "traced"]
    run.line(f"traced runs that ended 0: {sum(1 for row in traced if row[1] == '0')} of {len(traced)}")
    slowed = [float(x.rstrip("×")) for row in traced if row[-2] != "–" for x in row[-2].split(", ")]
    if slowed:
        over = sum(1 for x in slowed if x > 1.2)
        run.line(
            f"a traced step over an untraced one, each window: {min(slowed):.2f}–{max(slowed):.2f}× "
            f"(median {statistics.median(slowed):.2f}×; {over} of {len(slowed)} over 1.2×)"
        )
    said = (
        ("the job's own steps/s, traced over bare", rates["bare"], rates["traced"]),
        ("the job's own steps/s, under gpudash without windows over bare", rates["bare"], rates["plain"]),
        ("the job's own steps/s, traced over under gpudash without windows", rates["plain"], rates["traced"]),
        ("gpudash's figure (windows left out) over the bare job's own", rates["bare"], ours),
    )
    for label, base, new in said:
        if len(base) >= 2 and len(new) >= 2:
            f = ratio(label, [b for b in base if b is not None], [n for n in new if n is not None], pairs=False)
            f.text += f" ({len(new)} runs against {len(base)})"
            run.say(label, f)
    run.line(f"logs: {out}")
