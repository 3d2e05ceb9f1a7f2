"""Is ``gpudash tune -- CMD``'s winner the job's best, and its figure honest? Issue 56's GPU runs, a
phase a device call (``phase``), each keeping its part in ``out``:

- ``bare``: the job alone at each worker count, its own figure (``OUT/bare.json``);
- ``tune``: ``gpudash tune --json`` on it (``OUT/tune/``, its answer in ``OUT/tune.json``);
- ``verify``: the job as written and the job with the winner's edit applied to a copy of its script
  (the ``edits`` of tune's answer, as a user applies ``--diff``), run alone in pairs: what the
  winner is really worth, in ``OUT/verify.json``;
- ``table``: the figures and the targets — the winner within 10% of the best bare worker count and
  at least 4× the job as written (an input-bound job), and its claimed speedup inside or below what
  ``verify`` measured (never a false winner).

The job (``job``) takes ``--workers K`` and ``--seconds S`` and prints ``JOB … samples_per_s=X`` on
its last line (``benchmarks/jobs/cpu_augment_job.py``; ``benchmarks/jobs/resnet_job.py`` takes
``--steps`` instead: ``bare`` is skipped for it)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.cases.shared.gpudash_outputs import run_gpudash
from benchmarks.harness.case import BadParameter, Unavailable
from benchmarks.harness.context import Run
from benchmarks.harness.params import param
from benchmarks.harness.schedule import Schedule, rounds
from benchmarks.harness.stats import ratio, ratio_text

RATE = re.compile(r"samples_per_s=([0-9.]+)")


@dataclass(frozen=True)
class Params:
    phase: str = param("table", "bare, tune, verify or table")
    out: str = param("", "the folder each phase keeps its part in")
    job: tuple[str, ...] = param((), "the job's command, comma-separated (python,benchmarks/jobs/cpu_augment_job.py)")
    workers: tuple[str, ...] = param(("0", "4", "8", "12", "16"), "bare: the worker counts")
    seconds: float = param(30.0, "seconds a run (tune: a window)")
    max_minutes: float = param(6.0, "tune's --max-minutes")
    pairs: int = param(3, "verify: pairs of runs")


def job_rate(command: list[str]) -> float:
    """Run ``command`` alone; the samples/s its last ``JOB`` line gives."""
    done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    lines = [line for line in done.stdout.splitlines() if line.startswith("JOB ") and "samples_per_s=" in line]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"{' '.join(command)} failed: {done.stderr.strip()[-500:]}")
    match = RATE.search(lines[-1])
    assert match is not None
    return float(match.group(1))


def job_args(p: Params) -> list[str]:
    """The job's own length under tune and verify: long enough for every run."""
    if "--steps" in p.job or "--seconds" in p.job:
        return []
    return ["--seconds", "100000"] if p.phase == "tune" else ["--seconds", f"{p.seconds:g}"]


def bare(run: Run, p: Params, out: Path) -> None:
    rates = {}
    for k in (int(x) for x in p.workers):
        rates[k] = job_rate([*p.job, "--workers", str(k), "--seconds", f"{p.seconds:g}"])
        run.line(f"bare num_workers={k}: {rates[k]:.1f} samples/s")
    (out / "bare.json").write_text(json.dumps({"command": list(p.job), "rates": rates}, indent=2))


def tune(run: Run, p: Params, out: Path) -> None:
    argv = ["tune", "--seconds", f"{p.seconds:g}", "--max-minutes", f"{p.max_minutes:g}", "--json"]
    argv += ["--out", str(out / "tune"), "--", *p.job, *job_args(p)]
    done = run_gpudash(*argv, timeout=60 * p.max_minutes + 600, check=False)
    run.progress(done.stderr)
    if done.returncode != 0:
        raise RuntimeError(f"gpudash tune failed ({done.returncode})")
    doc = json.loads(done.stdout)
    doc["command"] = ["gpudash", *argv]
    (out / "tune.json").write_text(json.dumps(doc, indent=2))
    run.line(f"tune's answer kept in {out / 'tune.json'}")


def edited_copy(script: Path, edits: list[dict[str, object]], where: Path) -> Path:
    """A copy of ``script`` with tune's edits applied (each ``before`` text replaced by its ``after``)."""
    text = script.read_text()
    for e in edits:
        if Path(str(e["file"])).resolve() == script.resolve():
            assert str(e["before"]) in text, e
            text = text.replace(str(e["before"]), str(e["after"]), 1)
    copy = where / script.name
    copy.write_text(text)
    return copy


def verify(run: Run, p: Params, out: Path) -> None:
    doc = json.loads((out / "tune.json").read_text())
    script = Path(next(a for a in p.job if a.endswith(".py")))
    work = out / "edited"
    work.mkdir(exist_ok=True)
    shutil.copy(script, work / "original.py")
    edited = edited_copy(script, doc["edits"], work)

    def rate_of(path: Path) -> float:
        return job_rate([str(path) if a == str(script) else a for a in p.job] + job_args(p))

    arms = {"as written": lambda: rate_of(script), "winner": lambda: rate_of(edited)}
    got = rounds(arms, p.pairs, Schedule.ABBA, each=lambda i, r: run.line(f"pair {i + 1}: {r}"))
    (out / "verify.json").write_text(
        json.dumps({"as_written": got["as written"], "winner": got["winner"], "edits": doc["edits"]}, indent=2)
    )


def table(run: Run, p: Params, out: Path) -> None:
    doc = json.loads((out / "tune.json").read_text())
    winner, speed = doc["winner"]["samples_per_s"]["mean"], doc["speedup"]
    run.comment("gpudash tune on a job")
    run.line(f"`{' '.join(doc['command'])}`")
    run.line()
    against = "no setting was faster"
    if speed and doc["winner"]["settings"] and speed["low"] is not None:
        against = f"{speed['verdict']} {speed['mean']:.3g}× [{speed['low']:.3g}–{speed['high']:.3g}]"
    else:
        speed = {"mean": 1.0, "verdict": "no change detected"}
    settings = doc["winner"]["settings"] or "the job as written"
    run.line(f"- tune's winner: {settings}, {winner:.1f} samples/s; against the job as written: {against}")
    if (out / "bare.json").exists():
        bare_table(run, winner, {int(k): v for k, v in json.loads((out / "bare.json").read_text())["rates"].items()})
    if (out / "verify.json").exists():
        verified(run, json.loads((out / "verify.json").read_text()), speed)


def bare_table(run: Run, winner: float, rates: dict[int, float]) -> None:
    best = max(rates, key=lambda k: rates[k])
    run.line()
    t = run.table(["bare num_workers", "samples/s"], ["---:", "---:"])
    for k, v in sorted(rates.items()):
        run.row(t, k, f"{v:.1f}")
    within, gain = winner / rates[best], winner / rates[0]
    run.line()
    run.line(
        f"- the winner over the best bare count ({best}: {rates[best]:.1f}): {within:.3f} "
        f"(target ≥ 0.90: {'met' if within >= 0.9 else '**not met**'}); over bare 0 workers: "
        f"{gain:.2f}× (target ≥ 4: {'met' if gain >= 4 else '**not met**'})"
    )


def verified(run: Run, v: dict[str, Any], speed: dict[str, Any]) -> None:
    f = run.keep("winner/as written", ratio("winner/as written", v["as_written"], v["winner"]))
    honest = f.high is None or speed["mean"] <= f.high * 1.05 or speed["verdict"] != "faster"
    said = "inside or below that, within 5%: honest" if honest else "**above what the edit gives**"
    run.line(
        f"- the winner's edit applied to the script, {len(v['winner'])} interleaved bare pairs: "
        f"{ratio_text(f)} ({f.verdict}); tune's figure {speed['mean']:.3g}× {said}"
    )


def measure(run: Run, p: Params) -> None:
    phases = {"bare": bare, "tune": tune, "verify": verify, "table": table}
    if p.phase not in phases:
        raise BadParameter(f"phase {p.phase!r}: one of {', '.join(phases)}")
    if not p.out:
        raise BadParameter("-p out=DIR: the folder the phases share")
    if p.phase != "table" and not p.job:
        raise Unavailable("-p job=…: the job's command")
    out = Path(p.out)
    out.mkdir(parents=True, exist_ok=True)
    phases[p.phase](run, p, out)
