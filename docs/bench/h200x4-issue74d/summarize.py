"""Issue 74d's probe figures, compared with the benchmarks' harness (each a ratio of speeds with
its 95% interval and verdict, the rounds paired): call 4's ``cost.jsonl`` (comm_cost_probe.py) and
call 2's ``ddp_hook.txt`` (memory_probe.py's DDP). A run's figure is its two ranks' mean: they step
in lockstep. Two ranks' lines that came back joined on one line are split, the second in the first's
round and arm.

python docs/bench/h200x4-issue74d/summarize.py
"""

from __future__ import annotations

import json
import os
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
from benchmarks.harness.stats import ratio  # noqa: E402 - the repository's root first

HERE = Path(__file__).parent
TAGS = ("round", "gpudash")  # what run3.sh put at a line's start


def rows(path: Path, prefix: str = "") -> list[dict[str, Any]]:
    """The JSON objects of a probe's output, in order; a line's lines joined (``}{``) split."""
    out: list[dict[str, Any]] = []
    for line in path.read_text().splitlines():
        line = line.removeprefix(prefix).replace("}JOB ", "}\n").replace("}{", "}\n{")
        for part in line.splitlines():
            row = json.loads(part.removeprefix(prefix))
            if "round" not in row and out and "round" in out[-1]:  # the line's tags, on its first part alone
                row |= {key: out[-1][key] for key in TAGS if key in out[-1]}
            out.append(row)
    return out


def by_round(found: list[dict[str, Any]], key: str, value: str) -> dict[str, list[float]]:
    """Each variant's figure a round, in round order (the ranks' mean of ``value``)."""
    runs: dict[tuple[str, int], list[float]] = defaultdict(list)
    for row in found:
        runs[(row[key], row["round"])].append(float(row[value]))
    variants: dict[str, list[float]] = defaultdict(list)
    for (variant, _round), values in sorted(runs.items(), key=lambda kv: kv[0][1]):
        variants[variant].append(statistics.fmean(values))
    return variants


def main() -> None:
    cost = rows(HERE / "call4" / "cost.jsonl")
    for row in cost:
        row["what"] = "gpudash" if row.get("gpudash") else row["variant"]
        row["steps_per_s"] = 1e3 / row["median_ms"]
    speed = by_round(cost, "what", "steps_per_s")
    print("call 4: DDP ResNet-50 (30.5 ms a step), steps/s, two rounds paired")
    for base, new in (("builtin", "hook"), ("hook", "hook-timed"), ("builtin", "sync-debug"), ("builtin", "gpudash")):
        print(" ", ratio(f"{new} over {base}", speed[base], speed[new]).text)
    ddp = rows(HERE / "call2" / "ddp_hook.txt", prefix="JOB ")
    for i, row in enumerate(ddp):
        row["round"] = 1 + i // 6  # six lines a round: built-in, hook and gpudash, two ranks each
        row["what"] = "gpudash" if row["gpudash"] else "hook" if row["python_hook"] else "builtin"
    short = by_round(ddp, "what", "steps_per_s")
    print("call 2: DDP of 8 linear layers (3.9 ms a step), steps/s, two rounds paired")
    for base, new in (("builtin", "hook"), ("builtin", "gpudash")):
        print(" ", ratio(f"{new} over {base}", short[base], short[new]).text)


if __name__ == "__main__":
    main()
