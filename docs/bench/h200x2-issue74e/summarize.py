"""This folder's probe figures, compared with the benchmarks' harness (each a ratio with its 95%
interval and verdict, the rounds paired):

- calls D, E and F (``kernels_only.jsonl``, kernels_only_probe.py): a traced step over the untraced
  ones, each window, by kind — the windows without CUPTI's runtime and driver records against
  gpudash's GPU-only window, paired by round (a round: one window of each kind, in a row);
- call C (``cost.jsonl``, comm_cost_probe.py): the DDP ResNet-50 step's speed under each variant,
  the ranks' mean a run, paired by round;
- call G where it has run (``callG/ddp_short.jsonl``, ``callG.sh``): a DDP of 3.9 ms steps bare,
  with DDP's reference Python hook alone and under gpudash, paired by round.

python docs/bench/h200x2-issue74e/summarize.py
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
WINDOW_CALLS = ("callD", "callE", "callF")


def json_lines(path: Path) -> list[dict[str, Any]]:
    """The JSON objects of a probe's output; two ranks' lines joined on one (``}{``) split, the
    second taking the first's tags (its round, whether under gpudash)."""
    out: list[dict[str, Any]] = []
    for line in path.read_text().splitlines():
        for part in line.replace("}JOB {", "}{").replace("}{", "}\n{").splitlines():
            row = json.loads(part)
            if "round" not in row and out:
                row |= {key: out[-1][key] for key in ("round", "gpudash", "arm") if key in out[-1]}
            out.append(row)
    return out


def windows() -> dict[str, list[float]]:
    """Each kind's traced-over-untraced ratio a window, in round order over the calls."""
    kinds: dict[str, list[float]] = defaultdict(list)
    for call in WINDOW_CALLS:
        for row in json_lines(HERE / call / "kernels_only.jsonl"):
            kinds[row["kind"]].append(float(row["median_ratio"]))
    return kinds


def costs() -> dict[str, list[float]]:
    """Each variant's steps/s a round (its ranks' mean)."""
    runs: dict[tuple[str, int], list[float]] = defaultdict(list)
    for row in json_lines(HERE / "callC" / "cost.jsonl"):
        what = "gpudash" if row.get("gpudash") else row["variant"]
        runs[(what, row["round"])].append(1e3 / float(row["median_ms"]))
    out: dict[str, list[float]] = defaultdict(list)
    for (what, _round), values in sorted(runs.items(), key=lambda kv: kv[0][1]):
        out[what].append(statistics.fmean(values))
    return out


def short_steps() -> dict[str, list[float]]:
    """Call G's arms, steps/s a round (the ranks' mean); {} where it has not run."""
    path = HERE / "callG" / "ddp_short.jsonl"
    if not path.exists():
        return {}
    runs: dict[tuple[str, int], list[float]] = defaultdict(list)
    for row in json_lines(path):
        runs[(row["arm"], row["round"])].append(float(row["steps_per_s"]))
    out: dict[str, list[float]] = defaultdict(list)
    for (arm, _round), values in sorted(runs.items(), key=lambda kv: kv[0][1]):
        out[arm].append(statistics.fmean(values))
    return out


def main() -> None:
    kinds = windows()
    print(f"calls D-F: a traced step over an untraced one, {len(kinds['cuda'])} windows a kind, paired by round")
    for kind, values in kinds.items():
        print(f"  {kind}: " + ", ".join(f"{v:.2f}" for v in values) + f" (median {statistics.median(values):.2f})")
    for new in ("kernels", "kernels-nocorr"):
        print(" ", ratio(f"{new} over cuda", kinds["cuda"], kinds[new], higher_is_better=False).text)
    speed = costs()
    print("call C: DDP ResNet-50, steps/s, two rounds paired")
    for what, values in speed.items():
        print(f"  {what}: " + ", ".join(f"{v:.2f}" for v in values))
    for base, new in (
        ("builtin", "hook"),
        ("hook", "hook-timed"),
        ("hook", "hook-one-then"),
        ("hook", "hook-arrival"),
        ("builtin", "gpudash"),
    ):
        print(" ", ratio(f"{new} over {base}", speed[base], speed[new]).text)
    if short := short_steps():
        print("call G: a DDP of 3.9 ms steps (9 buckets), steps/s, rounds paired")
        for arm in ("hook", "gpudash"):
            print(" ", ratio(f"{arm} over bare", short["bare"], short[arm]).text)


if __name__ == "__main__":
    main()
