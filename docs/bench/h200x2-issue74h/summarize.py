"""This folder's probe figures, compared with the benchmarks' harness (each a ratio with its 95%
interval and verdict):

- call M (``callM/ddp.jsonl``, cupti_probe.py ddp): a traced step over the untraced ones, each
  window of a DDP ResNet-50 on 2 H200s, by recorder — Kineto's GPU-only window (``kineto``), CUPTI's
  kernel records driven directly (``raw``), and those with the runtime and driver records Kineto
  adds (``raw+api``); each kind in processes of its own, so compared unpaired (a window a value);
- call M (``callM/micro.jsonl``, cupti_probe.py micro): µs a launch of a host-bound loop of tiny
  launches, untraced and traced, by recorder;
- call P (``callP/out.txt``): the job's own steps/s bare and under gpudash without windows, paired
  by round.

python docs/bench/h200x2-issue74h/summarize.py
"""

from __future__ import annotations

import json
import os
import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
from benchmarks.harness.stats import ratio  # noqa: E402 - the repository's root first

HERE = Path(__file__).parent
KINDS = ("kineto", "raw", "raw+api")


def by_kind(name: str, key: str) -> dict[str, list[float]]:
    """Each recorder's ``key`` a window (or block) of call M's ``name`` output, in order."""
    out: dict[str, list[float]] = defaultdict(list)
    for line in (HERE / "callM" / f"{name}.jsonl").read_text().splitlines():
        row = json.loads(line)
        out[row["kind"]].append(float(row[key]))
    return out


def hooks_rounds() -> dict[str, list[float]]:
    """Call P's steps/s a run, by arm, in round order (the last figure a line: rank 0's or 1's)."""
    out: dict[str, list[float]] = defaultdict(list)
    for line in (HERE / "callP" / "out.txt").read_text().splitlines():
        if match := re.match(r"(bare|hooks) \d+: .*steps_per_s=([\d.]+)$", line):
            out[match[1]].append(float(match[2]))
    return out


def main() -> None:
    windows = by_kind("ddp", "ratio")
    print(f"call M: a traced step over an untraced one, {len(windows['raw'])} windows a kind (DDP ResNet-50)")
    for kind in KINDS:
        values = windows[kind]
        print(f"  {kind}: " + ", ".join(f"{v:.2f}" for v in values) + f" (median {statistics.median(values):.2f})")
    for new in ("raw", "raw+api"):
        print(
            " ", ratio(f"{new} over kineto", windows["kineto"], windows[new], pairs=False, higher_is_better=False).text
        )
    untraced, traced = by_kind("micro", "untraced_us_per_launch"), by_kind("micro", "traced_us_per_launch")
    print("call M: µs a launch of tiny launches (medians of 6 blocks), untraced → traced")
    for kind in KINDS:
        print(f"  {kind}: {statistics.median(untraced[kind]):.2f} → {statistics.median(traced[kind]):.2f}")
        print("   ", ratio(f"{kind} traced over untraced", untraced[kind], traced[kind], higher_is_better=False).text)
    arms = hooks_rounds()
    print(
        "call P: steps/s, bare "
        + ", ".join(f"{v:.2f}" for v in arms["bare"])
        + "; hooks "
        + ", ".join(f"{v:.2f}" for v in arms["hooks"])
    )
    print(" ", ratio("gpudash's hooks over bare", arms["bare"], arms["hooks"]).text)


if __name__ == "__main__":
    main()
