"""Pool the rounds of several ``engine_overhead.py`` outputs per group and compare two groups.

    python benchmarks/compare_overhead_runs.py --a new_*.txt --b old_*.txt

Each round's engine/bare ratio is one observation (rounds alternate bare and engine, so a
ratio is already paired against the GPU's drift). Prints each group's median ratio and a
two-sided Mann-Whitney U test of A against B: p above 0.05 is "no change detected".
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
from pathlib import Path

ROW = re.compile(r"^\| \d+ \| [\d.]+ \| [\d.]+ \| ([\d.]+) \|(?: [\d.]+ \| ([\d.]+) \|)?")


def ratios(paths: list[str]) -> tuple[list[float], list[float]]:
    """(engine/bare, engine without sync counting/bare) of every round in ``paths``."""
    with_sync: list[float] = []
    without: list[float] = []
    for path in paths:
        for line in Path(path).read_text().splitlines():
            m = ROW.match(line)
            if m:
                with_sync.append(float(m.group(1)))
                if m.group(2):
                    without.append(float(m.group(2)))
    return with_sync, without


def main() -> int:
    from scipy.stats import mannwhitneyu

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--a", nargs="+", required=True, help="outputs of group A (e.g. this checkout)")
    p.add_argument("--b", nargs="+", required=True, help="outputs of group B (e.g. the code before)")
    args = p.parse_args()
    a, b = ratios(args.a), ratios(args.b)
    print("| ratio | A rounds | A median | B rounds | B median | Mann-Whitney p | verdict |")
    print("|---|---|---|---|---|---|---|")
    for name, xa, xb in (("engine/bare", a[0], b[0]), ("engine, no sync count/bare", a[1], b[1])):
        if not xa or not xb:
            continue
        pval = mannwhitneyu(xa, xb).pvalue
        verdict = "no change detected" if pval > 0.05 else ("A faster" if statistics.median(xa) > statistics.median(xb) else "A slower")
        print(f"| {name} | {len(xa)} | {statistics.median(xa):.3f} | {len(xb)} | {statistics.median(xb):.3f} "
              f"| {pval:.2f} | {verdict} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
