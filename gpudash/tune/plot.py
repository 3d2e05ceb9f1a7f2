"""``tune.png`` and ``tune.svg``: every measured candidate's samples/s with its 95% interval, fastest
on top; the winner in colour, the candidates that dropped out grey. Matplotlib with Agg, imported
only to draw; the bars come from ``gpudash.tune.report.TuneReport.bars`` (this module knows no report)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gpudash.stats.comparison import Estimate
from gpudash.sweep.plot import save_figure

COLOURS = {"winner": "#2b7bba", "finalist": "#8fb8dc", "dropped": "#c8c8c8"}


@dataclass(frozen=True)
class Bar:
    """One measured candidate: its label, its samples/s and how it fared in the race."""

    label: str
    speed: Estimate
    fared: str  # a key of COLOURS: winner, finalist or dropped


def plot(bars: list[Bar], out_dir: Path, title: str) -> list[Path]:
    """Draw ``bars`` (fastest first) into ``out_dir``; returns the files written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = bars[::-1]  # fastest at the top
    fig, ax = plt.subplots(figsize=(9.0, 1.2 + 0.32 * len(rows)))
    try:
        for y, bar in enumerate(rows):
            e = bar.speed
            err = None
            if e.low is not None and e.high is not None:
                err = [[e.mean - e.low], [e.high - e.mean]]
            ax.barh(y, e.mean, xerr=err, color=COLOURS[bar.fared], ecolor="#333333", capsize=3)
        ax.set_yticks(range(len(rows)), [bar.label for bar in rows], fontsize=8)
        ax.set_xlabel("samples/s (95% interval)")
        ax.set_title(title, fontsize=10)
        return save_figure(fig, out_dir, "tune")
    finally:
        plt.close(fig)
