"""probe.txt's windows compared: each arm's traced-over-untraced ratio, and the ratio under gpudash
over the bare one with Welch's 95% interval of the log ratios (12 windows each).
Usage: python docs/bench/h200x2-issue89w/s34/compare_probe.py docs/bench/h200x2-issue89w/s34/probe.txt"""

import json
import math
import statistics
import sys

from scipy import stats

by: dict[str, list[float]] = {}
for line in open(sys.argv[1]):
    if line.startswith("PROBE "):
        row = json.loads(line[6:])
        by.setdefault(row["under"], []).append(math.log(row["ratio"]))
bare, under = by["bare"], by["gpudash"]
for name, logs in (("bare", bare), ("gpudash", under)):
    ratios = [math.exp(v) for v in logs]
    print(f"{name}: {len(ratios)} windows, median {statistics.median(ratios):.3f}x, over 1.2x: {sum(r > 1.2 for r in ratios)}")
low, high = stats.ttest_ind(under, bare, equal_var=False).confidence_interval(0.95)
verdict = "no change detected" if low < 0 < high else ("larger" if low > 0 else "smaller")
mean = statistics.mean(under) - statistics.mean(bare)
print(f"a window's distortion under gpudash over bare: {math.exp(mean):.3f}x [{math.exp(low):.3f}-{math.exp(high):.3f}], {verdict}")
