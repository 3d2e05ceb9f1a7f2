"""A written sweep read back: ``sweep.csv``'s summary rows as ``ConfigSummary`` (for ``gpudash
report``) and its plot drawn again."""

from __future__ import annotations

from pathlib import Path

from gpudash.core.stage_times import StageTimes
from gpudash.stats.comparison import Comparison, Estimate, Verdict
from gpudash.sweep.csv_rows import MEANS
from gpudash.sweep.plan import Configuration, FamilyPlan
from gpudash.sweep.plot import plot, plot_title
from gpudash.sweep.results import ConfigSummary


def _optional(row: dict[str, str], key: str) -> float | None:
    return float(row[key]) if row.get(key) else None


def summary_from_row(row: dict[str, str], position: int, base: Configuration | None) -> ConfigSummary:
    """A ``sweep.csv`` summary row back as a ``ConfigSummary`` (what its tables and plot need;
    a row without a ``knobs`` cell, from before that column, ran with none)."""
    label, batch, n = row["variant"], int(row["batch_size"]), int(row["n_samples"] or 0)
    variant = label.split("#", 1)[0].split("+", 1)[0]
    config = Configuration(row["workload"], variant, label, batch, position, row.get("knobs") or "none")
    stats: dict[str, Estimate | None] = {}
    if row["steps_per_s"]:
        batches = tuple(float(b) for b in row.get("steps_per_s_batches", "").split(";") if b)
        stats["steps_per_s"] = Estimate(
            float(row["steps_per_s"]), _optional(row, "steps_per_s_low"), _optional(row, "steps_per_s_high"), n, batches
        )
    for key in MEANS:
        value = _optional(row, key)
        stats[key] = None if value is None else Estimate(value, None, None, n)
    comparison = None
    if row["verdict"]:
        comparison = Comparison(
            float(row["ratio"]), _optional(row, "ratio_low"), _optional(row, "ratio_high"), Verdict(row["verdict"])
        )
    stages = None
    if row.get("stage1"):
        stages = StageTimes(row["stage1"], float(row["stage1_ms"]), row["stage2"], float(row["stage2_ms"]))
    return ConfigSummary(
        config,
        0,
        float(row["seconds"] or 0),
        n,
        stats,
        comparison,
        None if comparison is None else base,
        row["error"],
        stages,
        row.get("noise") or "",
    )


def summaries_from_csv(path: Path) -> list[tuple[FamilyPlan, list[ConfigSummary]]]:
    """Every family's summaries in a written ``sweep.csv``, in the order written (read by the
    bounded reader of ``gpudash report``: ``UnreadableCsv`` when it is not a whole CSV)."""
    from gpudash.recording.csvread import read_table
    from workloads.registry import family

    header, records = read_table(path)
    rows = [
        row
        for row in (dict(zip(header, cells, strict=False)) for _, cells in records)
        if row.get("row_kind") == "summary"
    ]
    out: dict[str, list[ConfigSummary]] = {}
    bases: dict[tuple[str, int], Configuration] = {}
    for row in rows:
        summaries = out.setdefault(row["workload"], [])
        s = summary_from_row(row, len(summaries), bases.get((row["workload"], int(row["batch_size"]))))
        if s.is_base:
            bases[(s.config.family, s.config.batch_size)] = s.config
        summaries.append(s)
    return [(FamilyPlan(name, family(name).title, tuple(s.config for s in ss)), ss) for name, ss in out.items()]


def redraw(sweep_dir: Path, dest: Path | None = None, families: tuple[str, ...] | None = None) -> list[Path]:
    """Draw ``sweep.png``/``.svg`` of a written sweep again (into ``dest``, default the sweep's
    directory) from its ``sweep.csv`` and ``sweep.json`` (ignored when it fails its checks);
    ``families``: only these."""
    from gpudash.recording.sidecar import read_sidecar

    meta = read_sidecar(sweep_dir / "sweep.csv").data
    chosen = [
        (fp, ss) for fp, ss in summaries_from_csv(sweep_dir / "sweep.csv") if families is None or fp.family in families
    ]
    return plot(chosen, dest or sweep_dir, title=plot_title(meta))
