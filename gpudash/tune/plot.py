"""``tune.png`` and ``tune.svg``: every measured candidate's samples/s with its 95% interval, fastest
on top; the winner in colour, the candidates that dropped out grey. Matplotlib with Agg, imported
here only."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from gpudash.tune.report import TuneReport

WINNER, FINALIST, DROPPED = "#2b7bba", "#8fb8dc", "#c8c8c8"


def plot(report: TuneReport) -> list[Path]:
    """Draw the candidates' bars; returns the files written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    measured = [(c, report.speed(c)) for c in report.ranked()]
    rows = [(c, e) for c, e in measured if e is not None][::-1]  # fastest at the top
    fig, ax = plt.subplots(figsize=(9.0, 1.2 + 0.32 * len(rows)))
    try:
        for y, (c, e) in enumerate(rows):
            colour = WINNER if c == report.winner else (DROPPED if c in report.fates else FINALIST)
            err = None
            if e.low is not None and e.high is not None:
                err = [[e.mean - e.low], [e.high - e.mean]]
            ax.barh(y, e.mean, xerr=err, color=colour, ecolor="#333333", capsize=3)
        ax.set_yticks(range(len(rows)), [f"{c.label} · b{c.config.batch_size}" for c, _ in rows], fontsize=8)
        ax.set_xlabel("samples/s (95% interval)")
        ax.set_title(f"gpudash tune · {report.plan.family}", fontsize=10)
        fig.tight_layout()
        paths = [report.out_dir / "tune.png", report.out_dir / "tune.svg"]
        fig.savefig(paths[0], dpi=120)
        fig.savefig(paths[1])
    finally:
        plt.close(fig)
    return paths
