"""How often does an A/A sweep claim a change? The false-claim rate of ``gpudash sweep``, measured.

    .venv/bin/python benchmarks/aa_false_claims.py [--runs 20] [--out DIR]
    .venv/bin/python benchmarks/aa_false_claims.py --tiny        # one short A/A run, for CI

Each A/A run is the command a user types for an A/A check, ``gpudash sweep -w sync_loss -v
fixed,fixed -b 2 --device cpu …``: the same configuration listed twice, measured in interleaved,
shuffled repeats. A run whose verdict for the second is ``faster`` or ``slower`` made a false claim
(``no change detected`` and ``within noise`` claim nothing; ``too short`` decides nothing). The rate
of false claims comes with its exact 95% interval (Clopper-Pearson). One A/B run with a real
difference (``--ab``: by default ``sync_loss`` fixed against fixed+channels_last, about twice as fast
on the 2-core CPU; ``--ab-repeats`` rounds) shows that the verdicts still see a change. The
machine's load average is recorded with each run: other processes sharing the CPU are the load a
user's machine has.

Each run's verdict is also *replayed* from its ``sweep.csv`` repeat rows (each repeat's mean,
seconds and batch means) through this checkout's ``estimate_over_stretches`` and ``compare``, so a
run of an older tree (``--tree``) shows the old and the new method on the same measurements.
``--out DIR`` keeps every run's ``sweep.csv`` and ``sweep.md`` (``DIR/runs/``), ``results.md`` and
``results.json``.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
CLAIMS = ("faster", "slower")


@dataclass(frozen=True)
class RunResult:
    """One sweep's verdict for its second configuration against its first."""

    kind: str  # "A/A" or "A/B"
    ratio: float | None
    low: float | None
    high: float | None
    verdict: str
    noise: str  # the sweep's noise note for the second configuration ("" when quiet)
    repeat_means: dict[str, list[float]]  # steps/s of each repeat, per configuration label
    load_before: float  # the 1-minute load average when the run began
    seconds: float
    replayed: str  # this checkout's verdict on the same repeats ("ratio [low–high] verdict")

    @property
    def claims(self) -> bool:
        """A verdict that says the two differ."""
        return self.verdict in CLAIMS


def sweep_argv(workload: str, variants: str, batch: int, repeats: int, seconds: float, warmup: float) -> list[str]:
    """The ``gpudash sweep`` arguments of one run (without ``--out``)."""
    return [
        "sweep", "-w", workload, "-v", variants, "-b", str(batch), "--repeats", str(repeats),
        "--seconds", f"{seconds:g}", "--warmup", f"{warmup:g}", "--device", "cpu", "-q",
    ]  # fmt: skip


def _float(cell: str) -> float | None:
    return float(cell) if cell else None


def replay(rows: list[dict[str, str]], labels: list[str]) -> str:
    """The second configuration against the first, recomputed from their repeat rows by this
    checkout's statistics: "1.004× [0.990–1.018] no change detected"."""
    from gpudash.stats.comparison import compare, estimate_over_stretches

    estimates = []
    for label in labels:
        mine = [r for r in rows if r["row_kind"] == "repeat" and r["variant"] == label and r["steps_per_s"]]
        stretches = [
            (float(r["steps_per_s"]), float(r["seconds"]), [float(b) for b in r["steps_per_s_batches"].split(";") if b])
            for r in mine
        ]
        estimates.append(estimate_over_stretches(stretches, sum(int(r["n_samples"]) for r in mine)))
    base, new = estimates
    if base is None or new is None:
        return "–"
    c = compare(base, new)
    interval = "(no CI)" if c.low is None or c.high is None else f"[{c.low:.3f}–{c.high:.3f}]"
    return f"{c.ratio:.3f}× {interval} {c.verdict}"


def run_sweep(kind: str, argv: list[str], out: Path, tree: Path) -> RunResult:
    """Run ``tree``'s ``python -m gpudash`` with ``argv`` into ``out`` and read its second summary row."""
    load, t0 = os.getloadavg()[0], time.perf_counter()
    env = dict(os.environ, PYTHONPATH=str(tree))
    subprocess.run([sys.executable, "-m", "gpudash", *argv, "--out", str(out)], cwd=tree, env=env, check=True)
    elapsed = time.perf_counter() - t0
    with open(out / "sweep.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    summaries = [r for r in rows if r["row_kind"] == "summary"]
    if len(summaries) != 2:
        raise SystemExit(f"error: expected 2 summary rows in {out / 'sweep.csv'}, found {len(summaries)}")
    second = summaries[1]
    repeats: dict[str, list[float]] = {}
    for r in rows:
        if r["row_kind"] == "repeat" and r["steps_per_s"]:
            repeats.setdefault(r["variant"], []).append(float(r["steps_per_s"]))
    return RunResult(
        kind,
        _float(second["ratio"]),
        _float(second["ratio_low"]),
        _float(second["ratio_high"]),
        second["verdict"],
        second["noise"],
        repeats,
        load,
        elapsed,
        replay(rows, [summaries[0]["variant"], second["variant"]]),
    )


def clopper_pearson(claims: int, runs: int, confidence: float = 0.95) -> tuple[float, float]:
    """The exact (Clopper-Pearson) interval of a rate of ``claims`` in ``runs``."""
    from scipy.stats import beta

    alpha = 1.0 - confidence
    low = 0.0 if claims == 0 else float(beta.ppf(alpha / 2, claims, runs - claims + 1))
    high = 1.0 if claims == runs else float(beta.ppf(1 - alpha / 2, claims + 1, runs - claims))
    return low, high


def _ratio(r: RunResult) -> str:
    if r.ratio is None:
        return "–"
    if r.low is None or r.high is None:
        return f"{r.ratio:.3f}× (no CI)"
    return f"{r.ratio:.3f}× [{r.low:.3f}–{r.high:.3f}]"


def markdown(results: list[RunResult], command: str) -> str:
    """The table of every run and the false-claim rate with its interval."""
    import torch

    aa = [r for r in results if r.kind == "A/A"]
    claims = sum(r.claims for r in aa)
    unflagged = sum(r.claims and not r.noise for r in aa)
    lines = [
        "# A/A false claims",
        "",
        f"- **Command:** `{command}`",
        f"- **Machine:** {os.cpu_count()} CPUs ({platform.processor() or platform.machine()}), "
        f"Python {platform.python_version()}, torch {torch.__version__}",
        f"- **Date:** {time.strftime('%Y-%m-%d %H:%M')}",
        "",
        "| # | kind | ratio [95% CI] | verdict | replayed by this checkout | noise | load (1 min) "
        "| repeats' steps/s | s |",
        "|--:|---|---|---|---|---|--:|---|--:|",
    ]
    for i, r in enumerate(results, 1):
        reps = "; ".join(f"{k}: " + ", ".join(f"{v:.3g}" for v in vs) for k, vs in r.repeat_means.items())
        lines.append(
            f"| {i} | {r.kind} | {_ratio(r)} | {r.verdict or '–'} | {r.replayed} | {r.noise or 'quiet'} | "
            f"{r.load_before:.2f} | {reps} | {r.seconds:.0f} |"
        )
    if aa:
        low, high = clopper_pearson(claims, len(aa))
        lines += [
            "",
            f"**False claims: {claims} of {len(aa)} A/A runs = {claims / len(aa):.1%} "
            f"(95% CI {low:.1%}–{high:.1%}, Clopper-Pearson)**; without a noise flag: {unflagged}.",
        ]
        replayed = sum(r.replayed.endswith(CLAIMS) for r in aa)
        low, high = clopper_pearson(replayed, len(aa))
        lines.append(
            f"Replayed by this checkout: {replayed} of {len(aa)} = {replayed / len(aa):.1%} "
            f"(95% CI {low:.1%}–{high:.1%})."
        )
    for r in results:
        if r.kind == "A/B":
            lines.append(f"A/B: {_ratio(r)}, {r.verdict}{' ⚠ ' + r.noise if r.noise else ''}; replayed: {r.replayed}.")
    return "\n".join(lines) + "\n"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--runs", type=int, default=20, help="A/A runs (default: %(default)s; 0: the A/B only)")
    p.add_argument("--workload", "-w", default="sync_loss", help="family (default: %(default)s)")
    p.add_argument("--variant", "-v", default="fixed", help="the variant listed twice (default: %(default)s)")
    p.add_argument("--batch", "-b", type=int, default=2, help="batch size (default: %(default)s)")
    p.add_argument("--repeats", type=int, default=3, help="each sweep's rounds (default: %(default)s)")
    p.add_argument("--seconds", type=float, default=2.0, help="measured per repeat (default: %(default)s)")
    p.add_argument("--warmup", type=float, default=1.0, help="warm-up per repeat (default: %(default)s)")
    p.add_argument(
        "--ab", default="sync_loss:fixed,fixed+channels_last:2", metavar="FAMILY:V1,V2:BATCH",
        help="the A/B run with a real difference ('' for none; default: %(default)s)",
    )  # fmt: skip
    p.add_argument("--ab-repeats", type=int, default=5, help="the A/B run's rounds (default: %(default)s)")
    p.add_argument("--out", type=Path, help="write results.md, results.json and runs/ (each sweep's CSV) here")
    p.add_argument("--tree", type=Path, default=ROOT, help="the checkout whose gpudash runs the sweeps (default: this)")
    p.add_argument("--tiny", action="store_true", help="one short A/A run and no A/B (CI): a few seconds")
    args = p.parse_args(argv)
    if args.tiny:
        args.runs, args.repeats, args.seconds, args.warmup, args.ab = 1, 2, 1.0, 0.5, ""
    if args.runs < 0 or min(args.repeats, args.ab_repeats) < 1 or args.seconds <= 0 or args.warmup < 0:
        p.error("--runs must not be negative, the repeats at least 1, --seconds positive, --warmup not negative")
    if args.runs == 0 and not args.ab:
        p.error("--runs 0 and no --ab: nothing to run")
    if args.ab and len(args.ab.split(":")) != 3:
        p.error(f"--ab {args.ab!r}: expected FAMILY:V1,V2:BATCH")
    if not (args.tree / "gpudash" / "__main__.py").is_file():
        p.error(f"--tree {args.tree}: no gpudash/__main__.py there")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    timing = (args.repeats, args.seconds, args.warmup)
    aa = sweep_argv(args.workload, f"{args.variant},{args.variant}", args.batch, *timing)
    results: list[RunResult] = []
    with tempfile.TemporaryDirectory(prefix="aa-false-claims-") as tmp:
        runs = [("A/A", aa, f"aa{i + 1:02d}") for i in range(args.runs)]
        if args.ab:
            family, variants, batch = args.ab.split(":")
            ab_timing = (args.ab_repeats, args.seconds, args.warmup)
            runs.append(("A/B", sweep_argv(family, variants, int(batch), *ab_timing), "ab"))
        for kind, sweep, name in runs:
            results.append(run_sweep(kind, sweep, Path(tmp) / name, args.tree.resolve()))
            r = results[-1]
            print(f"{name}: {_ratio(r)} {r.verdict} {r.noise}; replayed {r.replayed}", file=sys.stderr, flush=True)
            if args.out is not None:
                keep = args.out / "runs" / name
                keep.mkdir(parents=True, exist_ok=True)
                for file in ("sweep.csv", "sweep.md"):
                    shutil.copy(Path(tmp) / name / file, keep / file)
    command = "python benchmarks/aa_false_claims.py " + " ".join(sys.argv[1:] if argv is None else argv)
    md = markdown(results, command.strip())
    print(md)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "results.md").write_text(md)
        payload = {"command": command, "sweep": aa, "runs": [asdict(r) | {"claims": r.claims} for r in results]}
        (args.out / "results.json").write_text(json.dumps(payload, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
