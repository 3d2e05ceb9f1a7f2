"""The regional compile's step against the whole model's, from regional.txt (four 40-step rounds
each, taken as repeats), with gpudash's own interval and verdict (gpudash/stats/comparison.py).

    python docs/bench/h100-compile-floor/compare_regional.py > docs/bench/h100-compile-floor/regional-comparison.txt
"""

import json
from pathlib import Path

from gpudash.stats.comparison import compare, estimate_from_batches

runs = {}
for line in (Path(__file__).parent / "regional.txt").read_text().splitlines():
    if line.startswith("{"):
        run = json.loads(line)
        runs[run["mode"]] = estimate_from_batches(run["samples_per_s"])
whole = runs["whole"]
print("| against the whole model's compile | samples/s | ratio [95%] | verdict |")
print("|---|--:|--:|---|")
print(f"| whole model (base) | {whole.mean:.0f} ± {(whole.high - whole.low) / 2:.0f} | 1.000 | (base) |")
for mode in ("regional", "regional-stem"):
    e = runs[mode]
    c = compare(whole, e)
    print(f"| {mode} | {e.mean:.0f} ± {(e.high - e.low) / 2:.0f} | {c.ratio:.3f} [{c.low:.3f}–{c.high:.3f}] | {c.verdict.value} |")
