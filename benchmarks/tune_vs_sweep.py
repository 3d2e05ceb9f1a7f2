"""``gpudash tune`` against the exhaustive sweep of the same family and batch sizes: is tune's winner
within 3% of the sweep's best configuration, in at most 40% of the sweep's time?

    python benchmarks/tune_vs_sweep.py SWEEP_DIR TUNE_DIR [SWEEP_DIR TUNE_DIR ...]

Each pair: a ``gpudash sweep`` output directory (the ``--preset beyond`` entry of one family, or
any sweep) and a ``gpudash tune`` directory of the same family and batch sizes. For each pair and
its winner (over all of its batch sizes) it prints the sweep's best configuration and tune's, by
samples/s with their 95% intervals, tune's over the sweep's (the interval of the ratio from the two
intervals, on the log scale, each taken as normal: the runs are independent), and the two runs'
wall times. Verdicts: *met* when the ratio's interval lies above 0.97 (or the time share is at
most 40%), *not met* when it lies below, *not decided* when it straddles the line. Torch-free.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path

WITHIN = 0.97  # the winner's samples/s at least 97% of the sweep's best
TIME_SHARE = 0.40  # in at most 40% of the sweep's time
Z95 = 1.959964


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


def measured_rows(path: Path, kind: str) -> list[dict[str, str]]:
    """The rows of a CSV whose ``row_kind`` is ``kind`` and that have a samples/s."""
    with open(path, newline="") as f:
        return [row for row in csv.DictReader(f) if row["row_kind"] == kind and row["samples_per_s"]]


def sweep_bests(folder: Path) -> list[Best]:
    """Every summary row of a sweep as samples/s (the interval: steps/s's, times the batch)."""
    out = []
    for row in measured_rows(folder / "sweep.csv", "summary"):
        b = int(row["batch_size"])
        low, high = (float(row[k]) * b if row[k] else None for k in ("steps_per_s_low", "steps_per_s_high"))
        out.append(Best(row["variant"], b, float(row["samples_per_s"]), low, high))
    return out


def tune_bests(folder: Path) -> list[Best]:
    """Every measured candidate of a tune run."""
    out = []
    for row in measured_rows(folder / "tune.csv", "candidate"):
        low, high = (float(row[k]) if row[k] else None for k in ("samples_per_s_low", "samples_per_s_high"))
        out.append(Best(row["candidate"], int(row["batch_size"]), float(row["samples_per_s"]), low, high))
    return out


def ratio(new: Best, old: Best) -> tuple[float, float | None, float | None]:
    """new/old with a 95% interval from the two intervals (log scale, normal)."""
    r = new.mean / old.mean
    if None in (new.low, new.high, old.low, old.high):
        return r, None, None
    se = math.hypot(*(math.log(b.high / b.low) / (2 * Z95) for b in (new, old)))  # type: ignore[operator]
    return r, r * math.exp(-Z95 * se), r * math.exp(Z95 * se)


def verdict(low: float | None, high: float | None, line: float, higher: bool = True) -> str:
    if low is None or high is None:
        return "not decided (no interval)"
    if (low >= line) if higher else (high <= line):
        return "met"
    if (high < line) if higher else (low > line):
        return "not met"
    return "not decided"


def seconds(folder: Path, name: str) -> float:
    meta = json.loads((folder / name).read_text())
    if "elapsed_s" in meta:
        return float(meta["elapsed_s"])
    start, end = (dt.datetime.fromisoformat(meta[k]) for k in ("start_time", "end_time"))
    return (end - start).total_seconds()


def against_best(sweep: Path, tune: Path) -> tuple[Best, Best, float, float | None, float | None] | None:
    """The sweep's best, tune's winner (each over all batch sizes) and winner/best with its
    interval (None: either run measured nothing)."""
    s = max(sweep_bests(sweep), key=lambda x: x.mean, default=None)
    t = max(tune_bests(tune), key=lambda x: x.mean, default=None)
    if s is None or t is None:
        return None
    return (s, t, *ratio(t, s))


def rows(sweep: Path, tune: Path, note: str = "") -> list[str]:
    """The table's rows of one tune run against its sweep (``note``: after the case's name, to
    tell runs of the same case apart)."""
    family = json.loads((tune / "tune.json").read_text())["workload"] + (f" ({note})" if note else "")
    out = []
    batches = sorted({x.batch_size for x in tune_bests(tune)})
    # one winner per tune run: over all its batch sizes (its best at one of several is no winner)
    found = against_best(sweep, tune)
    if found is not None:
        s, t, r, low, high = found
        interval = "" if low is None else f" [{low:.3f}–{high:.3f}]"
        b = ",".join(map(str, batches))
        out.append(f"| {family} b{b} | {s.text()} | {t.text()} | {r:.3f}×{interval} | {verdict(low, high, WITHIN)} |")
    ts, tt = seconds(sweep, "sweep.json"), seconds(tune, "tune.json")
    share = tt / ts
    out.append(
        f"| {family} b{','.join(map(str, batches))} time | {ts:.0f} s | {tt:.0f} s | {share:.0%} of the sweep's | "
        f"{'met' if share <= TIME_SHARE else 'not met'} (≤ {TIME_SHARE:.0%}) |"
    )
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dirs", nargs="+", type=Path, metavar="SWEEP_DIR TUNE_DIR")
    args = p.parse_args()
    if len(args.dirs) % 2:
        p.error("give the directories in pairs: SWEEP_DIR TUNE_DIR")
    print("| case | the sweep's best (samples/s) | tune's winner (samples/s) | tune / sweep | within 3% |")
    print("|---|---|---|--:|---|")
    for sweep, tune in zip(args.dirs[::2], args.dirs[1::2], strict=True):
        for line in rows(sweep, tune):
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
