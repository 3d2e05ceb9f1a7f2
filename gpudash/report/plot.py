"""The pictures of ``gpudash report``: ``report.png``/``report.svg`` with matplotlib's Agg
backend (no display), and ``report.html`` (the Markdown rendered by markdown-it-py, which
Textual already installs, with the SVG inline: one file, nothing fetched). Labels come from the
files read: matplotlib draws them as they are (``literal``: no mathtext), the HTML renders no
raw HTML and links nothing outside the report."""

from __future__ import annotations

import html
import re
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gpudash.report.load import Run

_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf")


def _colour(i: int) -> str:
    return _COLOURS[i % len(_COLOURS)]


def literal(text: str) -> str:
    """``text`` as matplotlib should draw it: a ``$`` is a dollar sign, not mathtext (which
    raises on a label such as ``$\\foo$`` when the figure is drawn)."""
    return text.replace("$", r"\$")


def smoothed(time_s: Sequence[float], values: Sequence[float], window_s: float) -> list[float]:
    """Each value replaced by the mean of the values within ``window_s`` centred on its time
    (``time_s`` ascending; a window of 0 leaves them as they are)."""
    import numpy as np

    if window_s <= 0 or not values:
        return list(values)
    t, v = np.asarray(time_s, dtype=float), np.asarray(values, dtype=float)
    sums = np.concatenate(([0.0], np.cumsum(v)))
    lo = np.searchsorted(t, t - window_s / 2, side="left")
    hi = np.searchsorted(t, t + window_s / 2, side="right")
    return list((sums[hi] - sums[lo]) / (hi - lo))


def _timelines(ax_steps: Any, ax_gpu: Any, runs: Sequence[tuple[int, Run]], smooth_s: float = 0.0) -> None:
    """Throughput (top) and GPU utilisation (bottom) over time, the recordings overlaid on one time
    axis (seconds since each began), each change a dashed line labelled with what changed.
    ``smooth_s``: throughput also drawn as a moving mean over that window, the raw line faint."""
    any_gpu = False
    for i, run in runs:
        t = run.timeline
        assert t is not None
        if smooth_s > 0:
            ax_steps.plot(t.time_s, t.steps_per_s, color=_colour(i), linewidth=0.6, alpha=0.3)
            label = literal(f"{run.name} (mean over {smooth_s:g} s)")
            ax_steps.plot(t.time_s, smoothed(t.time_s, t.steps_per_s, smooth_s), color=_colour(i), label=label)
        else:
            ax_steps.plot(t.time_s, t.steps_per_s, color=_colour(i), linewidth=1.0, label=literal(run.name))
        if t.gpu_util_pct:
            any_gpu = True
            ax_gpu.plot(t.gpu_time_s, t.gpu_util_pct, color=_colour(i), linewidth=1.0, label=literal(run.name))
        for m in t.markers:
            for ax in (ax_steps, ax_gpu):
                ax.axvline(m.time_s, color=_colour(i), linestyle="--", linewidth=0.7, alpha=0.8)
            ax_steps.annotate(
                literal(m.text),
                (m.time_s, 1.0),
                xycoords=("data", "axes fraction"),
                rotation=90,
                ha="right",
                va="top",
                fontsize=7,
                color=_colour(i),
                xytext=(-2, -2),
                textcoords="offset points",
                bbox={"boxstyle": "square,pad=0.1", "fc": "white", "ec": "none", "alpha": 0.8},
            )
    ax_steps.set_ylabel("steps/s")
    ax_steps.set_ylim(bottom=0)
    ax_steps.legend(fontsize=8, loc="lower right")
    ax_steps.set_title("throughput over time (dashed: changes)", fontsize=10)
    ax_gpu.set_ylabel("GPU utilisation %")
    ax_gpu.set_xlabel("seconds since the run started")
    ax_gpu.set_ylim(0, 105)
    if not any_gpu:
        ax_gpu.text(
            0.5,
            0.5,
            "no GPU telemetry in these recordings (NVML unavailable)",
            ha="center",
            va="center",
            transform=ax_gpu.transAxes,
            fontsize=9,
            color="#555555",
        )


def _bars(ax: Any, runs: Sequence[tuple[int, Run]]) -> None:
    """Sweeps: steps/s per configuration with its 95% whiskers, one bar per sweep."""
    names = list(dict.fromkeys(c.name for _, run in runs for c in run.configs))
    width = 0.8 / len(runs)
    for k, (i, run) in enumerate(runs):
        by_name = {c.name: c.steps for c in run.configs}
        xs: list[float] = []
        means: list[float] = []
        errs: list[list[float]] = [[], []]
        for x, name in enumerate(names):
            e = by_name.get(name)
            if e is None:
                continue
            xs.append(x - 0.4 + width * (k + 0.5))
            means.append(e.mean)
            errs[0].append(e.mean - e.low if e.low is not None else 0.0)
            errs[1].append(e.high - e.mean if e.high is not None else 0.0)
        ax.bar(
            xs,
            means,
            width=width * 0.95,
            yerr=errs,
            capsize=3,
            color=_colour(i),
            label=literal(run.name),
            edgecolor="black",
            linewidth=0.5,
        )
    ax.set_xticks(range(len(names)), [literal(n) for n in names], rotation=25, ha="right", fontsize=7)
    ax.set_ylabel("steps/s (95% CI)")
    ax.set_title("sweeps: steps/s per configuration", fontsize=10)
    ax.legend(fontsize=8)


def plot_runs(runs: Sequence[Run], out: Path, smooth_s: float = 0.0) -> list[str]:
    """Draw ``report.png`` and ``report.svg`` into ``out`` (``smooth_s``: see ``_timelines``);
    returns their names."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    recordings = [(i, r) for i, r in enumerate(runs) if r.kind == "recording"]
    sweeps = [(i, r) for i, r in enumerate(runs) if r.kind == "sweep"]
    heights = [3.2, 2.2] * bool(recordings) + [3.6] * bool(sweeps)
    fig, axes = plt.subplots(
        len(heights), 1, figsize=(10, sum(heights) + 0.8), squeeze=False, gridspec_kw={"height_ratios": heights}
    )
    with warnings.catch_warnings():  # numpy's overflow warnings on values near 1e308 from a file: not the user's news
        warnings.simplefilter("ignore", RuntimeWarning)
        _draw(fig, axes, runs, recordings, sweeps, out, smooth_s)
    return ["report.png", "report.svg"]


def _draw(
    fig: Any,
    axes: Any,
    runs: Sequence[Run],
    recordings: Sequence[tuple[int, Run]],
    sweeps: Sequence[tuple[int, Run]],
    out: Path,
    smooth_s: float,
) -> None:
    import matplotlib.pyplot as plt

    try:
        ax_iter = iter(axes[:, 0])
        if recordings:
            ax_steps, ax_gpu = next(ax_iter), next(ax_iter)
            ax_gpu.sharex(ax_steps)
            _timelines(ax_steps, ax_gpu, recordings, smooth_s)
        if sweeps:
            _bars(next(ax_iter), sweeps)
        fig.suptitle(literal("gpudash report · " + ", ".join(r.name for r in runs)), fontsize=10)
        fig.tight_layout()
        fig.savefig(out / "report.png", dpi=120)
        fig.savefig(out / "report.svg")
    finally:
        plt.close(fig)


_STYLE = """body{font-family:system-ui,sans-serif;max-width:72rem;margin:2rem auto;padding:0 1rem;color:#222}
table{border-collapse:collapse;margin:1rem 0;font-size:.9rem}th,td{border:1px solid #ccc;padding:.25rem .5rem}
th{background:#f3f3f3}code{background:#f3f3f3;padding:0 .2rem}svg{max-width:100%;height:auto}"""


def inline_svg(svg_path: Path) -> str:
    """The SVG element of ``svg_path`` without its XML prologue, to sit inside HTML."""
    text = svg_path.read_text(encoding="utf-8")
    start = text.find("<svg")
    return text[start:] if start >= 0 else html.escape(text)


def _relative(url: str) -> bool:
    """A link within the report's directory: no scheme (``https:``, ``javascript:``), no host."""
    return ":" not in url and not url.startswith(("/", "\\"))


def html_page(markdown_text: str, svg_path: Path) -> str:
    """``report.html``: the report's Markdown as HTML, its plot inline; no external reference."""
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": False}).enable("table")  # a file's text is text: no raw HTML
    md.validateLink = _relative  # type: ignore[method-assign]  # and no link or image out of the report
    body = md.render(markdown_text)
    body = re.sub(r"<p><img [^>]*></p>", lambda _: f"<figure>{inline_svg(svg_path)}</figure>", body)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>gpudash report</title>'
        f"<style>{_STYLE}</style></head><body>\n{body}</body></html>\n"
    )
