"""How often does an A/A sweep claim a change? The false-claim rate of ``gpudash sweep``, measured.

Each A/A run is the command a user types for an A/A check, ``gpudash sweep -w sync_loss -v V,V -b 2
--device cpu …`` (V: the family's first sync-free variant, unless ``variant`` says), the same
configuration listed twice, measured in interleaved, shuffled repeats. A run whose verdict for the
second is ``faster`` or ``slower`` made a false claim (``no change detected`` and ``within noise``
claim nothing; ``too short`` decides nothing). The rate of false claims comes with its exact 95%
interval (Clopper-Pearson). One A/B run with a real difference (``ab``: by default ``sync_loss`` V
against V+channels_last, about twice as fast on the 2-core CPU) shows that the verdicts still see a
change. The machine's load average is kept with each run.

Each run's verdict is also *replayed* from its ``sweep.csv`` repeat rows through this checkout's
``estimate_over_stretches`` and ``compare``, so a run of an older checkout (``tree``) shows the old
and the new method on the same measurements. ``keep`` keeps every run's ``sweep.csv`` and
``sweep.md`` (``KEEP/runs/``)."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from benchmarks.cases.shared.gpudash_outputs import run_gpudash, text_rows
from benchmarks.harness.case import BadParameter
from benchmarks.harness.checkout import checkout_env, checkout_path
from benchmarks.harness.context import Run
from benchmarks.harness.params import param
from benchmarks.harness.stamp import ROOT

CLAIMS = ("faster", "slower")


@dataclass(frozen=True)
class Params:
    runs: int = param(20, "A/A runs (0: the A/B only)")
    workload: str = param("sync_loss", "the family")
    variant: str | None = param(None, "the variant listed twice (none: the family's first sync-free one)")
    batch: int = param(2, "the batch size")
    repeats: int = param(3, "each sweep's rounds")
    seconds: float = param(2.0, "seconds measured a repeat")
    warmup: float = param(1.0, "warm-up seconds a repeat")
    ab: str | None = param(None, "the A/B run, FAMILY:V1,V2:BATCH ('' for none; none: V against V+channels_last)")
    ab_repeats: int = param(5, "the A/B run's rounds")
    keep: str | None = param(None, "keep each run's sweep.csv and sweep.md in KEEP/runs/")
    tree: str = param(str(ROOT), "the checkout whose gpudash runs the sweeps")


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
    argv = ["sweep", "-w", workload, "-v", variants, "-b", str(batch), "--repeats", str(repeats)]
    return [*argv, "--seconds", f"{seconds:g}", "--warmup", f"{warmup:g}", "--device", "cpu", "-q"]


def floats(cell: str) -> float | None:
    return float(cell) if cell else None


def replay(rows: list[dict[str, str]], labels: list[str]) -> str:
    """The second configuration against the first, recomputed from their repeat rows by this
    checkout's statistics: "1.004× [0.990–1.018] no change detected"."""
    from gpudash.stats.batch_means import estimate_over_stretches
    from gpudash.stats.comparison import compare

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
    run_gpudash(*argv, "--out", str(out), cwd=tree, env=checkout_env(tree), capture=False)
    elapsed = time.perf_counter() - t0
    rows = text_rows(out / "sweep.csv")
    summaries = [r for r in rows if r["row_kind"] == "summary"]
    if len(summaries) != 2:
        raise RuntimeError(f"expected 2 summary rows in {out / 'sweep.csv'}, found {len(summaries)}")
    second = summaries[1]
    repeats: dict[str, list[float]] = {}
    for r in rows:
        if r["row_kind"] == "repeat" and r["steps_per_s"]:
            repeats.setdefault(r["variant"], []).append(float(r["steps_per_s"]))
    ratio, low, high = (floats(second[k]) for k in ("ratio", "ratio_low", "ratio_high"))
    replayed = replay(rows, [summaries[0]["variant"], second["variant"]])
    return RunResult(kind, ratio, low, high, second["verdict"], second["noise"], repeats, load, elapsed, replayed)


def clopper_pearson(claims: int, runs: int, confidence: float = 0.95) -> tuple[float, float]:
    """The exact (Clopper-Pearson) interval of a rate of ``claims`` in ``runs``."""
    from scipy.stats import beta

    alpha = 1.0 - confidence
    low = 0.0 if claims == 0 else float(beta.ppf(alpha / 2, claims, runs - claims + 1))
    high = 1.0 if claims == runs else float(beta.ppf(1 - alpha / 2, claims + 1, runs - claims))
    return low, high


def ratio_cell(r: RunResult) -> str:
    if r.ratio is None:
        return "–"
    if r.low is None or r.high is None:
        return f"{r.ratio:.3f}× (no CI)"
    return f"{r.ratio:.3f}× [{r.low:.3f}–{r.high:.3f}]"


def planned(p: Params) -> list[tuple[str, list[str], str]]:
    """The runs: (kind, the sweep's arguments, a name), the A/A ones then the A/B one."""
    from workloads.registry import FAMILIES

    if p.runs < 0 or min(p.repeats, p.ab_repeats) < 1 or p.seconds <= 0 or p.warmup < 0:
        raise BadParameter("runs must not be negative, the repeats at least 1, seconds positive, warmup not negative")
    variant = p.variant or FAMILIES[p.workload].variants_by_role()["sync_free"]
    ab = p.ab if p.ab is not None else f"{p.workload}:{variant},{variant}+channels_last:{p.batch}"
    if p.runs == 0 and not ab:
        raise BadParameter("runs=0 and no ab: nothing to run")
    if ab and len(ab.split(":")) != 3:
        raise BadParameter(f"ab {ab!r}: expected FAMILY:V1,V2:BATCH")
    aa = sweep_argv(p.workload, f"{variant},{variant}", p.batch, p.repeats, p.seconds, p.warmup)
    runs = [("A/A", aa, f"aa{i + 1:02d}") for i in range(p.runs)]
    if ab:
        family, variants, batch = ab.split(":")
        runs.append(("A/B", sweep_argv(family, variants, int(batch), p.ab_repeats, p.seconds, p.warmup), "ab"))
    return runs


def measure(run: Run, p: Params) -> None:
    runs = planned(p)
    tree = checkout_path(p.tree)
    results: list[RunResult] = []
    with tempfile.TemporaryDirectory(prefix="aa-false-claims-") as tmp:
        for kind, argv, name in runs:
            results.append(run_sweep(kind, argv, Path(tmp) / name, tree))
            r = results[-1]
            run.progress(f"{name}: {ratio_cell(r)} {r.verdict} {r.noise}; replayed {r.replayed}")
            if p.keep is not None:
                kept = Path(p.keep) / "runs" / name
                kept.mkdir(parents=True, exist_ok=True)
                for file in ("sweep.csv", "sweep.md"):
                    shutil.copy(Path(tmp) / name / file, kept / file)
    run.data["sweep"] = runs[0][1] if runs else []
    run.data["runs"] = [asdict(r) | {"claims": r.claims} for r in results]
    document(run, results)


def document(run: Run, results: list[RunResult]) -> None:
    """The table of every run, and the false-claim rate with its interval."""
    run.comment("A/A false claims")
    cols = ["#", "kind", "ratio [95% CI]", "verdict", "replayed by this checkout", "noise", "load (1 min)"]
    table = run.table([*cols, "repeats' steps/s", "s"], ["--:", "---", "---", "---", "---", "---", "--:", "---", "--:"])
    for i, r in enumerate(results, 1):
        reps = "; ".join(f"{k}: " + ", ".join(f"{v:.3g}" for v in vs) for k, vs in r.repeat_means.items())
        cells = [r.verdict or "–", r.replayed, r.noise or "quiet", f"{r.load_before:.2f}", reps, f"{r.seconds:.0f}"]
        run.row(table, i, r.kind, ratio_cell(r), *cells)
    aa = [r for r in results if r.kind == "A/A"]
    run.line()
    if aa:
        claims = sum(r.claims for r in aa)
        unflagged = sum(r.claims and not r.noise for r in aa)
        low, high = clopper_pearson(claims, len(aa))
        run.line(
            f"**False claims: {claims} of {len(aa)} A/A runs = {claims / len(aa):.1%} "
            f"(95% CI {low:.1%}–{high:.1%}, Clopper-Pearson)**; without a noise flag: {unflagged}."
        )
        replayed = sum(r.replayed.endswith(CLAIMS) for r in aa)
        low, high = clopper_pearson(replayed, len(aa))
        rate = f"{replayed} of {len(aa)} = {replayed / len(aa):.1%}"
        run.line(f"Replayed by this checkout: {rate} (95% CI {low:.1%}–{high:.1%}).")
    for r in results:
        if r.kind == "A/B":
            run.line(f"A/B: {ratio_cell(r)}, {r.verdict}{' ⚠ ' + r.noise if r.noise else ''}; replayed: {r.replayed}.")
