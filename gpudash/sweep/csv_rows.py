"""The rows of ``sweep.csv``: its columns (and the older files', still read back), a row per
configuration × repeat and one per configuration, and ``FlushedCsv``, the writer that flushes
each row (the sweep's and tune's). Torch-free.

``sweep.csv``: one ``row_kind=repeat`` row per configuration × repeat as it finishes, and one
``row_kind=summary`` row per configuration when its family is done: the mean of all its
repeats with the 95% interval of steps/s, and its steps/s relative to the family's first
configuration at the same batch size (``ratio`` with its interval, and the verdict). Empty
cells: not available. Every row is flushed as it is written. ``variant`` holds the
configuration's label (the ``-v`` entry, ``fixed+amp=bf16``), ``knobs`` every knob it ran with
(``--knob``'s too; added after the first release, last, so older files read as ``none``).
"""

from __future__ import annotations

import csv
import dataclasses
import math
import os
from typing import Any

from gpudash.core.metrics import FIGURE_KEYS
from gpudash.core.stage_times import StageTimes
from gpudash.stats.comparison import Estimate
from gpudash.sweep.results import ConfigSummary, RepeatResult, pct_of

CSV_COLUMNS = (
    "row_kind",
    "workload",
    "variant",
    "batch_size",
    "repeat",
    "seconds",
    "n_samples",
    "steps_per_s",
    "steps_per_s_low",
    "steps_per_s_high",
    "steps_per_s_batches",
    "samples_per_s",
    "syncs_per_step",
    "gpu_util_pct",
    "power_w",
    "joules_per_step",
    "stage1",
    "stage1_ms",
    "stage2",
    "stage2_ms",
    "overlap_bound",
    "pct_of_bound",
    "ratio",
    "ratio_low",
    "ratio_high",
    "verdict",
    "error",
    "knobs",
    "noise",
    "sm_active_pct",
    "tensor_active_pct",
    "dram_active_pct",
    "mfu_pct",
)
# before GPM's and MFU's columns (read as empty), before the noise column too (read as quiet), and
# before the knobs column (read as knobs "none")
OLD_CSV_COLUMNS = (CSV_COLUMNS[:-4], CSV_COLUMNS[:-5], CSV_COLUMNS[:-6])
MEANS = tuple(k for k in FIGURE_KEYS if k != "steps_per_s")  # steps/s has columns of its own


def _cell(value: Any) -> str:
    """A CSV cell: 10 significant digits (enough that sweep.md's table, read back from the file,
    rounds as it did when written: 6 turned a half-width of 282.50004 into 282.5, "283" into "282"),
    empty for None and non-finite numbers."""
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.10g}" if math.isfinite(value) else ""
    return str(value)


class FlushedCsv:
    """A CSV written row by row, each row flushed (a crash or a kill leaves whole rows): the
    sweep's and tune's."""

    def __init__(self, path: os.PathLike[str] | str, columns: tuple[str, ...]) -> None:
        self.columns = columns
        self._file = open(path, "w", newline="", encoding="utf-8")
        self._csv = csv.DictWriter(self._file, fieldnames=columns, lineterminator="\n")
        self._csv.writeheader()
        self._file.flush()

    def row(self, row: dict[str, Any]) -> None:
        """Write one row (missing and None cells empty) and flush it."""
        self._csv.writerow({k: _cell(row.get(k)) for k in self.columns})
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def _interval_cells(e: Estimate | None) -> dict[str, Any]:
    """steps/s's interval and the batch means behind it ("a;b;c"): enough for ``gpudash
    report`` to compare two sweeps without the samples."""
    if e is None:
        return {}
    return {
        "steps_per_s_low": e.low,
        "steps_per_s_high": e.high,
        "steps_per_s_batches": ";".join(f"{b:.6g}" for b in e.batch_means),
    }


def _mean(e: Estimate | None) -> float | None:
    """The estimate's mean (None: not available)."""
    return None if e is None else e.mean


def stage_cells(stages: StageTimes | None, steps: Estimate | None) -> dict[str, Any]:
    """The stage-time columns: each stage's ms alone, the overlap bound, steps/s as % of it."""
    if stages is None:
        return {}
    cells = dataclasses.asdict(stages)
    cells.update(overlap_bound=stages.bound, pct_of_bound=_mean(pct_of(steps, stages.bound)))
    return cells


def repeat_row(r: RepeatResult) -> dict[str, Any]:
    """The CSV row of one configuration × repeat."""
    stats = r.estimates() if not r.error else {}
    steps = stats.get("steps_per_s")
    row = {
        "row_kind": "repeat",
        "workload": r.config.family,
        "variant": r.config.label,
        "batch_size": r.config.batch_size,
        "repeat": r.repeat,
        "seconds": round(r.seconds, 3),
        "n_samples": r.n_samples,
        "steps_per_s": _mean(steps),
        "error": r.error,
        "knobs": r.config.knobs,
        "noise": r.noise.note(),
    }
    row.update(_interval_cells(steps))
    row.update({key: _mean(stats.get(key)) for key in MEANS})
    row.update(stage_cells(r.stages, steps))
    return row


def summary_row(s: ConfigSummary) -> dict[str, Any]:
    """The CSV row of one configuration over its repeats."""
    steps = s.steps
    row = {
        "row_kind": "summary",
        "workload": s.config.family,
        "variant": s.config.label,
        "batch_size": s.config.batch_size,
        "repeat": None,
        "seconds": round(s.seconds, 3),
        "n_samples": s.n_samples,
        "steps_per_s": _mean(steps),
        "error": s.error,
        "knobs": s.config.knobs,
        "noise": s.noise,
    }
    row.update(_interval_cells(steps))
    row.update({key: _mean(s.stats.get(key)) for key in MEANS})
    row.update(stage_cells(s.stages, steps))
    if s.comparison is not None:
        c = s.comparison
        row.update(ratio=c.ratio, ratio_low=c.low, ratio_high=c.high, verdict=c.verdict.value)
    elif s.is_base:
        row.update(ratio=1.0)
    return row
