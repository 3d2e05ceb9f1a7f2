"""``sweep.png`` and ``sweep.svg``: steps/s bars with their 95% whiskers, one panel per (family,
batch size). matplotlib is imported only to draw, with Agg."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from gpudash.stats.fmt import fmt_ratio
from gpudash.stats.noise_tally import MARK
from gpudash.sweep.plan import FamilyPlan
from gpudash.sweep.results import ConfigSummary


def plot_title(meta: dict[str, Any]) -> str:
    """The plot's title: the GPU (or device), torch and the date."""
    device = meta.get("gpu_name") or meta.get("device_name") or meta.get("device") or "?"
    return (
        f"gpudash sweep · {device} · torch {meta.get('torch_version') or '?'} · {str(meta.get('start_time', ''))[:10]}"
    )


VERDICT_COLOURS = {"faster": "#2ca02c", "slower": "#d62728"}


def _has_ci(s: ConfigSummary) -> bool:
    return s.steps is not None and s.steps.has_interval


def _panel(ax: Any, title: str, summaries: list[ConfigSummary]) -> None:
    """Bars of steps/s with 95% whiskers; each bar's relative speed and its interval above it
    (staggered when the bars are many); a dashed mark across a bar at its own overlap bound, when
    timed. A bar without an interval has no whisker and no ratio: it is hatched, white, and says
    "no CI", so it cannot be taken for a measured one; colour only for a real difference measured
    on a quiet machine (a noisy one's bar says so)."""
    means = [s.steps.mean if s.steps is not None else 0.0 for s in summaries]
    ends = [(s.steps.low, s.steps.high) if s.steps is not None else (None, None) for s in summaries]
    lows = [m - lo if lo is not None else 0.0 for m, (lo, _) in zip(means, ends, strict=False)]
    highs = [hi - m if hi is not None else 0.0 for m, (_, hi) in zip(means, ends, strict=False)]
    colours = [
        "white"
        if not _has_ci(s)
        else "#7f7f7f"
        if s.is_base
        else VERDICT_COLOURS.get(str(s.comparison.verdict) if s.comparison and not s.noise else "", "#1f77b4")
        for s in summaries
    ]
    x = list(range(len(summaries)))
    hatches = ["" if _has_ci(s) else "//" for s in summaries]
    bars = ax.bar(x, means, width=0.6, color=colours, edgecolor="black", linewidth=0.6)
    for bar, hatch in zip(bars, hatches, strict=False):
        bar.set_hatch(hatch)
    with_ci = [i for i, s in enumerate(summaries) if _has_ci(s)]
    if with_ci:
        ax.errorbar(
            with_ci,
            [means[i] for i in with_ci],
            yerr=[[lows[i] for i in with_ci], [highs[i] for i in with_ci]],
            fmt="none",
            ecolor="black",
            capsize=5,
            linewidth=1.0,
        )
    ax.set_xlim(-0.7, len(x) - 0.3)
    bounds = [s.stages.bound if s.stages is not None else None for s in summaries]
    top = (
        max([m + h for m, h in zip(means, highs, strict=False)] + [b for b in bounds if b is not None], default=1.0)
        or 1.0
    )
    for i, bound in enumerate(bounds):
        if bound is not None:
            ax.hlines(bound, i - 0.4, i + 0.4, colors="black", linestyles="--", linewidth=0.9)
    if any(b is not None for b in bounds):
        ax.plot([], [], color="black", linestyle="--", linewidth=0.9, label="overlap bound 1000/max(t₁, t₂)")
        ax.legend(fontsize=7, loc="upper left")
    stagger = len(summaries) > 3
    for i, s in enumerate(summaries):
        text = _bar_label(s)
        lift = top * (0.02 + (0.07 if stagger and i % 2 else 0.0))
        ax.text(i, max(means[i] + highs[i], bounds[i] or 0.0) + lift, text, ha="center", va="bottom", fontsize=7)
    ticks = [tick_label(s.config.label) for s in summaries]
    wrapped = any("\n" in t for t in ticks)
    ax.set_xticks(x, ticks, rotation=20 if len(summaries) > 3 and not wrapped else 0, fontsize=7 if wrapped else 8)
    ax.set_ylim(0, top * 1.25)
    ax.set_ylabel("steps/s (95% CI)")
    ax.set_title(title, fontsize=10)


def _bar_label(s: ConfigSummary) -> str:
    """What a bar says above it: "failed", "no CI", "base", or its ratio with the interval."""
    if s.steps is None:
        return "failed"
    if not _has_ci(s):
        return "no CI"
    if s.is_base:
        return "base"
    if s.comparison is None or s.comparison.low is None:
        return "no CI"  # the base has none
    return fmt_ratio(s.comparison) + (f"\n{MARK}" if s.noise else "")


def tick_label(label: str) -> str:
    """A bar's label: each knob of ``serial+amp=bf16+cuda_graph`` on a line of its own."""
    return label.replace("+", "\n+")


def plot(families: list[tuple[FamilyPlan, list[ConfigSummary]]], out_dir: Path, *, title: str) -> list[Path]:
    """Draw one panel per (family, batch size); returns the files written (png, svg)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [
        (f"{fp.family} · batch {b}", [s for s in ss if s.config.batch_size == b])
        for fp, ss in families
        for b in dict.fromkeys(s.config.batch_size for s in ss)
    ]
    ncols = min(3, len(panels))
    nrows = math.ceil(len(panels) / ncols)
    bars = max(len(ss) for _, ss in panels)  # many bars (knob combinations): wider panels
    lines = max(tick_label(s.config.label).count("\n") for _, ss in panels for s in ss)  # and taller ticks
    size = (max(4.4, 1.3 * bars) * ncols + 0.4, (3.6 + 0.15 * lines) * nrows + 0.7)
    fig, axes = plt.subplots(nrows, ncols, figsize=size, squeeze=False)
    try:
        for ax, (name, summaries) in zip(axes.flat, panels, strict=False):
            _panel(ax, name, summaries)
        for ax in list(axes.flat)[len(panels) :]:
            ax.axis("off")
        fig.suptitle(title, fontsize=10)
        return save_figure(fig, out_dir, "sweep")
    finally:
        plt.close(fig)


def save_figure(fig: Any, out_dir: Path, stem: str) -> list[Path]:
    """Lay ``fig`` out and write ``STEM.png`` (120 dpi) and ``STEM.svg`` into ``out_dir``; returns them."""
    fig.tight_layout()
    paths = [out_dir / f"{stem}.png", out_dir / f"{stem}.svg"]
    fig.savefig(paths[0], dpi=120)
    fig.savefig(paths[1])
    return paths
