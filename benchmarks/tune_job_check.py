"""Is ``gpudash tune -- CMD``'s winner the job's best, and its figure honest? Issue 56's GPU runs.

    python benchmarks/tune_job_check.py bare   --out DIR --workers 0,4,8,12,16 [--seconds 30] -- CMD …
    python benchmarks/tune_job_check.py tune   --out DIR [--seconds 25 --max-minutes 6] -- CMD …
    python benchmarks/tune_job_check.py verify --out DIR [--pairs 3 --seconds 30] -- CMD …
    python benchmarks/tune_job_check.py table  --out DIR

``CMD`` is a job that takes ``--workers K`` and ``--seconds S`` and prints ``JOB … samples_per_s=X``
on its last line over its steps after a warm-up (``benchmarks/jobs/cpu_augment_job.py``;
``benchmarks/jobs/resnet_job.py`` takes ``--steps`` instead: ``bare`` is skipped for it).

- ``bare``: the job alone at each worker count, its own figure (``DIR/bare.json``);
- ``tune``: ``gpudash tune --json`` on it (``DIR/tune/``, its answer in ``DIR/tune.json``);
- ``verify``: the job as written and the job with the winner's edit applied to a copy of its
  script (the ``edits`` of tune's answer, as a user applies ``--diff``), run alone in interleaved
  pairs: what the winner is really worth (``compare_paired``), in ``DIR/verify.json``;
- ``table``: the figures and the targets — the winner within 10% of the best bare worker count and
  at least 4× the job as written (an input-bound job), and its claimed speedup inside or below
  what ``verify`` measured (never a false winner).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpudash.stats.comparison import compare_paired  # noqa: E402
from gpudash.stats.fmt import fmt_ratio  # noqa: E402

RATE = re.compile(r"samples_per_s=([0-9.]+)")


def job_rate(command: list[str]) -> float:
    """Run ``command`` alone; the samples/s its last ``JOB`` line gives."""
    done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    lines = [line for line in done.stdout.splitlines() if line.startswith("JOB ") and "samples_per_s=" in line]
    if done.returncode != 0 or not lines:
        raise SystemExit(f"tune_job_check: {' '.join(command)} failed: {done.stderr.strip()[-500:]}")
    match = RATE.search(lines[-1])
    assert match is not None
    return float(match.group(1))


def bare(args: argparse.Namespace, command: list[str]) -> None:
    rates = {}
    for k in (int(x) for x in args.workers.split(",")):
        rates[k] = job_rate([*command, "--workers", str(k), "--seconds", f"{args.seconds:g}"])
        print(f"bare num_workers={k}: {rates[k]:.1f} samples/s", flush=True)
    (args.out / "bare.json").write_text(json.dumps({"command": command, "rates": rates}, indent=2))


def tune(args: argparse.Namespace, command: list[str]) -> None:
    argv = [sys.executable, "-m", "gpudash", "tune", "--seconds", f"{args.seconds:g}", "--max-minutes"]
    argv += [f"{args.max_minutes:g}", "--json", "--out", str(args.out / "tune"), "--", *command, *args.job_args]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60 * args.max_minutes + 600)
    sys.stderr.write(done.stderr)
    if done.returncode != 0:
        raise SystemExit(f"tune_job_check: gpudash tune failed ({done.returncode})")
    doc = json.loads(done.stdout)
    doc["command"] = ["gpudash", *argv[3:]]
    (args.out / "tune.json").write_text(json.dumps(doc, indent=2))


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


def verify(args: argparse.Namespace, command: list[str]) -> None:
    doc = json.loads((args.out / "tune.json").read_text())
    script = Path(next(a for a in command if a.endswith(".py")))
    work = args.out / "edited"
    work.mkdir(exist_ok=True)
    shutil.copy(script, work / "original.py")
    edited = edited_copy(script, doc["edits"], work)
    as_written: list[float] = []
    winner: list[float] = []
    for i in range(args.pairs):
        order = [(as_written, script), (winner, edited)]
        for side, path in order if i % 2 == 0 else order[::-1]:
            argv = [str(path) if a == str(script) else a for a in command]
            side.append(job_rate([*argv, *args.job_args]))
        print(f"pair {i + 1}: as written {as_written[-1]:.1f}, winner {winner[-1]:.1f} samples/s", flush=True)
    out = {"as_written": as_written, "winner": winner, "edits": doc["edits"]}
    (args.out / "verify.json").write_text(json.dumps(out, indent=2))


def table(args: argparse.Namespace) -> None:
    doc = json.loads((args.out / "tune.json").read_text())
    winner = doc["winner"]["samples_per_s"]["mean"]
    speed = doc["speedup"]
    print(f"# gpudash tune on a job — {dt.date.today()}\n")
    print(f"`{' '.join(doc['command'])}`\n")
    against = "no setting was faster"
    if speed and doc["winner"]["settings"] and speed["low"] is not None:
        against = f"{speed['verdict']} {speed['mean']:.3g}× [{speed['low']:.3g}–{speed['high']:.3g}]"
    else:
        speed = {"mean": 1.0, "verdict": "no change detected"}
    print(f"- tune's winner: {doc['winner']['settings'] or 'the job as written'}, {winner:.1f} samples/s; "
          f"against the job as written: {against}")  # fmt: skip
    bare_path = args.out / "bare.json"
    if bare_path.exists():
        rates = {int(k): v for k, v in json.loads(bare_path.read_text())["rates"].items()}
        best = max(rates, key=lambda k: rates[k])
        print("\n| bare num_workers | samples/s |\n|---:|---:|")
        print("\n".join(f"| {k} | {v:.1f} |" for k, v in sorted(rates.items())))
        within, gain = winner / rates[best], winner / rates[0]
        print(f"\n- the winner over the best bare count ({best}: {rates[best]:.1f}): {within:.3f} "
              f"(target ≥ 0.90: {'met' if within >= 0.9 else '**not met**'}); over bare 0 workers: "
              f"{gain:.2f}× (target ≥ 4: {'met' if gain >= 4 else '**not met**'})")  # fmt: skip
    verify_path = args.out / "verify.json"
    if verify_path.exists():
        v = json.loads(verify_path.read_text())
        c = compare_paired(v["as_written"], v["winner"])
        honest = c.high is None or speed["mean"] <= c.high * 1.05 or speed["verdict"] != "faster"
        said = "inside or below that, within 5%: honest" if honest else "**above what the edit gives**"
        print(f"- the winner's edit applied to the script, {len(v['winner'])} interleaved bare pairs: "
              f"{fmt_ratio(c)} ({c.verdict}); tune's figure {speed['mean']:.3g}× "
              f"{said}")  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("phase", choices=("bare", "tune", "verify", "table"))
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--workers", default="0,4,8,12,16")
    p.add_argument("--seconds", type=float, default=30.0)
    p.add_argument("--max-minutes", type=float, default=6.0)
    p.add_argument("--pairs", type=int, default=3)
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    args = p.parse_args(argv[:cut])
    command = argv[cut + 1 :]
    args.job_args = []  # the job's own length under tune and verify: long enough for every run
    if command and "--steps" not in command and "--seconds" not in command:
        args.job_args = ["--seconds", "100000"] if args.phase == "tune" else ["--seconds", f"{args.seconds:g}"]
    args.out.mkdir(parents=True, exist_ok=True)
    if args.phase != "table" and not command:
        raise SystemExit("tune_job_check: give the job after --")
    {"bare": bare, "tune": tune, "verify": verify, "table": lambda a, _c: table(a)}[args.phase](args, command)


if __name__ == "__main__":
    main()
