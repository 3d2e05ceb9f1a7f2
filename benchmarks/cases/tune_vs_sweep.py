"""``gpudash tune`` against the exhaustive sweep of the same family and batch sizes: is tune's winner
within 3% of the sweep's best configuration, in at most 40% of the sweep's time?

Each pair (``pairs``): a sweep's result and a tune run's (``sweep`` and ``tune`` cases' results, or
the folders holding them: ``sweep.result.json``, ``tune.result.json``) of the same family and
batch sizes. For each pair and its winner (over all of its batch sizes): the sweep's best
configuration and tune's, by samples/s with their 95% intervals, tune's over the sweep's (the
interval from the two intervals: ``stats.ratio_of_intervals``), and the two runs' wall times.
Verdicts: *met* when the ratio's interval lies above 0.97 (or the time share is at most 40%), *not
met* when it lies below, *not decided* when it straddles the line. Reads results only: instant."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

from benchmarks.harness.case import BadParameter
from benchmarks.harness.context import Run
from benchmarks.harness.params import param
from benchmarks.harness.result import SUFFIX, Result, load
from benchmarks.harness.stats import Target, ratio_of_intervals

WITHIN = 0.97  # the winner's samples/s at least 97% of the sweep's best
TIME_SHARE = 0.40  # in at most 40% of the sweep's time
SAID = {"not shown": "not decided", "no interval": "not decided (no interval)"}


@dataclass(frozen=True)
class Params:
    pairs: tuple[str, ...] = param(
        ("docs/bench/h100-tune/beyond-encdec:docs/bench/h100-tune/tune-encdec",),
        "SWEEP:TUNE, each a result or the folder holding it",
    )


@dataclass(frozen=True)
class Best:
    label: str
    batch_size: int
    mean: float
    low: float | None
    high: float | None

    def text(self) -> str:
        half = "" if self.low is None or self.high is None else f" ± {(self.high - self.low) / 2:.3g}"
        return f"{self.label} b{self.batch_size}: {self.mean:.4g}{half}"


def result_in(where: str | Path, stem: str) -> Result:
    """The result at ``where``, or ``STEM.result.json`` in the folder ``where``."""
    path = Path(where)
    return load(path / f"{stem}{SUFFIX}" if path.is_dir() else path)


def sweep_bests(sweep: Result) -> list[Best]:
    """Every summary row of a sweep as samples/s (the interval: steps/s's, times the batch)."""
    out = []
    for row in sweep.data["rows"]:
        if row["samples_per_s"] is None:
            continue
        b = row["batch_size"]
        low, high = (row[k] * b if row[k] is not None else None for k in ("steps_per_s_low", "steps_per_s_high"))
        out.append(Best(row["variant"], b, float(row["samples_per_s"]), low, high))
    return out


def tune_bests(tune: Result) -> list[Best]:
    """Every measured candidate of a tune run."""
    rows = [r for r in tune.data["rows"] if r["row_kind"] == "candidate" and r["samples_per_s"] is not None]
    return [
        Best(
            r["candidate"], r["batch_size"], float(r["samples_per_s"]), r["samples_per_s_low"], r["samples_per_s_high"]
        )
        for r in rows
    ]


def verdict(low: float | None, high: float | None, line: float) -> str:
    judged = Target(line).judge(low, high)
    return SAID.get(judged, judged)


def seconds(r: Result) -> float:
    """A run's wall time in seconds (its sidecar's)."""
    meta = r.data["meta"]
    if "elapsed_s" in meta:
        return float(meta["elapsed_s"])
    start, end = (dt.datetime.fromisoformat(meta[k]) for k in ("start_time", "end_time"))
    return (end - start).total_seconds()


def against_best(sweep: Result, tune: Result) -> tuple[Best, Best, float, float | None, float | None] | None:
    """The sweep's best, tune's winner (each over all batch sizes) and winner/best with its
    interval (None: either run measured nothing)."""
    s = max(sweep_bests(sweep), key=lambda x: x.mean, default=None)
    t = max(tune_bests(tune), key=lambda x: x.mean, default=None)
    if s is None or t is None:
        return None
    return (s, t, *ratio_of_intervals(t.mean, t.low, t.high, s.mean, s.low, s.high))


def rows(sweep: Result, tune: Result, note: str = "") -> list[list[str]]:
    """The table's rows of one tune run against its sweep (``note``: after the case's name, to tell
    runs of the same case apart): the winner against the best, and the time."""
    family = tune.data["meta"]["workload"] + (f" ({note})" if note else "")
    batches = ",".join(map(str, sorted({x.batch_size for x in tune_bests(tune)})))
    out = []
    found = against_best(sweep, tune)  # one winner per tune run: over all its batch sizes
    if found is not None:
        s, t, r, low, high = found
        interval = "" if low is None or high is None else f" [{low:.3f}–{high:.3f}]"
        out.append([f"{family} b{batches}", s.text(), t.text(), f"{r:.3f}×{interval}", verdict(low, high, WITHIN)])
    ts, tt = seconds(sweep), seconds(tune)
    share = tt / ts
    met = f"{'met' if share <= TIME_SHARE else 'not met'} (≤ {TIME_SHARE:.0%})"
    out.append([f"{family} b{batches} time", f"{ts:.0f} s", f"{tt:.0f} s", f"{share:.0%} of the sweep's", met])
    return out


def measure(run: Run, p: Params) -> None:
    table = run.table(
        ["case", "the sweep's best (samples/s)", "tune's winner (samples/s)", "tune / sweep", "within 3%"],
        ["---", "---", "---", "--:", "---"],
    )
    for pair in p.pairs:
        sweep, _, tune = pair.partition(":")
        if not tune:
            raise BadParameter(f"pairs {pair!r}: SWEEP:TUNE")
        for row in rows(result_in(sweep, "sweep"), result_in(tune, "tune")):
            run.row(table, *row)
