"""The published sweeps in ``docs/bench/`` read for the page (each the ``sweep`` case's result,
``sweep.result.json``): their rows as estimates, figures, comparisons and tables, and the goals
judged against them. Every gpudash figure on the page comes from here; a comparison the sweep did
not make itself is ``gpudash.stats.comparison.compare`` over the batch means its rows carry."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

from benchmarks.harness.render import blocks_text
from benchmarks.harness.result import SUFFIX, Result, load
from gpudash.stats.comparison import Comparison, Estimate, compare
from gpudash.stats.fmt import fmt_pm, fmt_ratio

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
ALL, PIPE, AA = "h100-all", "h100-input-pipeline", "h100-aa"
# The "beyond the articles" sweeps, one per family (gpudash sweep --preset beyond, split by family
# to fit one device call each).
BEYOND = {
    "encdec": "h100-beyond-encdec",
    "sync_loss": "h100-beyond-sync",
    "augment": "h100-beyond-augment",
    "input_pipeline": "h100-beyond-input",
}
FAST = "amp=bf16+channels_last+cudnn_benchmark"
DECODE = "h100-gpu-decode"  # the gpu-decode rung (nvjpeg) against gpu-transform, one sweep
# The torchvision families (workloads/vision.py), one sweep each.
VISION = {"resnet50": "h100-vision-resnet50", "vit_b_16": "h100-vision-vit", "finetune": "h100-vision-finetune"}
# ResNet-50's strict-float32 step (tf32=never) against the best configuration, interleaved in one sweep:
# the "6x its own fp32" goal.
R50_FP32 = "h100-vision-resnet50-fp32"
R50_BEST = "h100-vision-resnet50-best"  # the best configuration alone, 6 repeats
R50_AUTOTUNE = "h100-vision-resnet50-autotune"  # compile=max-autotune tried, interrupted
R50_TUNE_SWEEP = "h100-tune/beyond-resnet50"  # the tune comparison's sweep (it measures the best too)
STRICT = "serial+tf32=never"
NVIDIA_A100_RN50 = 2470.0  # img/s, ResNet-50 training, one A100 80GB, mixed precision: NVIDIA's published figure
TUNE = DOCS / "bench" / "h100-tune"  # the `gpudash tune` runs and the sweeps they are held against


@cache
def sweep(name: str) -> Result:
    """A published sweep's result."""
    return load(DOCS / "bench" / name / f"sweep{SUFFIX}")


def rows(name: str) -> dict[tuple[str, str, int], dict[str, Any]]:
    """A sweep's summary rows by (workload, variant, batch size)."""
    return {(r["workload"], r["variant"], int(r["batch_size"])): r for r in sweep(name).data["rows"]}


def meta(name: str) -> dict[str, Any]:
    """A sweep's sidecar: its command, machine and times."""
    return dict(sweep(name).data["meta"])


def est(row: dict[str, Any]) -> Estimate:
    """A summary row's steps/s: mean, interval, samples and batch means."""
    return Estimate(
        float(row["steps_per_s"]),
        float(row["steps_per_s_low"]),
        float(row["steps_per_s_high"]),
        int(row["n_samples"]),
        tuple(float(b) for b in row["steps_per_s_batches"]),
    )


def steps(name: str, w: str, v: str, b: int) -> str:
    """ "178.4 ± 2.3" steps/s."""
    return fmt_pm(est(rows(name)[(w, v, b)]))


def versus(name: str, w: str, old: str, new: str, b: int) -> str:
    """``new`` against ``old``: "1.16 ± 0.02, faster"."""
    r = rows(name)
    c = compare(est(r[(w, old, b)]), est(r[(w, new, b)]))
    return f"{fmt_ratio(c)} ({c.verdict})"


def cell(name: str, w: str, v: str, b: int, key: str) -> str:
    """One column of a configuration's row, to 3 significant figures ("–" when empty)."""
    value = rows(name)[(w, v, b)][key]
    return f"{float(value):.3g}" if value is not None else "–"


def tables(name: str, skip: tuple[str, ...] = ()) -> str:
    """The family sections of a sweep's own report (headings one level down), its notes left out."""
    kept = [(h, b) for h, b in sweep(name).sections() if not h.startswith(skip) and not h.startswith("Notes")]
    return "\n".join("### " + (h + "\n" + blocks_text(b)).strip() + "\n" for h, b in kept)


def header(name: str) -> str:
    """A sweep's command, machine, versions and start, in one line."""
    m = meta(name)
    return (
        f"`{m['command']}` · {m['gpu_name']}, driver {m['driver']} · torch {m['torch_version']} "
        f"(CUDA {m['cuda_version']}) · {m['cpu_count']} CPUs · {str(m['start_time'])[:16]}"
    )


def ladder(name: str, w: str, b: int, order: list[str]) -> str:
    """Each variant against the one before it."""
    return "\n".join(
        f"| {old} → {new} | {steps(name, w, old, b)} → {steps(name, w, new, b)} | {versus(name, w, old, new, b)} |"
        for old, new in zip(order, order[1:], strict=False)
    )


def ratio(name: str, w: str, old: str, new: str, b: int) -> Comparison:
    """``new`` against ``old`` in one sweep, as a comparison."""
    r = rows(name)
    return compare(est(r[(w, old, b)]), est(r[(w, new, b)]))


def best_label(name: str, w: str, b: int) -> str:
    """The configuration with knobs that ran fastest (highest mean steps/s) in a sweep."""
    candidates = [
        (float(r["steps_per_s"]), v) for (fam, v, bs), r in rows(name).items() if fam == w and bs == b and "+" in v
    ]
    return max(candidates)[1]


def target_row(goal: str, c: Comparison, at_least: float) -> str:
    """A target "≥ N×" against a measured ratio: met only when the whole interval clears it."""
    if c.low is not None and c.low >= at_least:
        verdict = "met (the whole interval is above it)"
    elif c.ratio >= at_least:
        verdict = "met by the mean; the interval reaches below it"
    else:
        verdict = "**not met**"
    return f"| {goal} | ≥ {at_least:g}× | {fmt_ratio(c)} ({c.verdict}) | {verdict} |"


def at_least(e: Estimate, goal: float) -> str:
    """A goal "≥ goal" against a measured interval."""
    if e.low is not None and e.low >= goal:
        return "met (the whole interval meets it)"
    if e.high is not None and e.high < goal:
        return "**not met** (the whole interval misses it)"
    return "not decided (the interval spans the goal)"


def bound_pct(name: str, w: str, v: str, b: int) -> Estimate:
    """Steps/s as a % of the configuration's overlap bound, with the interval of steps/s."""
    row = rows(name)[(w, v, b)]
    return scaled(est(row), 100.0 / float(row["overlap_bound"]))


def seconds_per_step(name: str, w: str, v: str, b: int) -> str:
    """A configuration's seconds per step with its interval: "0.104 s (0.101–0.107)"."""
    e = est(rows(name)[(w, v, b)])
    assert e.low is not None and e.high is not None, f"{name}: {w} {v} b{b} has no interval"
    return f"{1 / e.mean:.3f} s ({1 / e.high:.3f}–{1 / e.low:.3f})"


def scaled(e: Estimate, k: float) -> Estimate:
    """An estimate times ``k`` (a unit's change: steps/s to images/s, to % of a bound)."""
    low, high = (None if x is None else x * k for x in (e.low, e.high))
    return Estimate(e.mean * k, low, high, e.n_samples, tuple(x * k for x in e.batch_means))


def images(name: str, w: str, v: str, b: int) -> Estimate:
    """Images/s of a configuration: its steps/s estimate times the batch."""
    return scaled(est(rows(name)[(w, v, b)]), b)


def stage_ratio(name: str, w: str, v: str, b: int) -> float:
    """The longer stage's time over the shorter's, from the sweep's stage timing."""
    row = rows(name)[(w, v, b)]
    one, two = float(row["stage1_ms"]), float(row["stage2_ms"])
    return max(one, two) / min(one, two)
