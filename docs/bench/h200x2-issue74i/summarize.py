"""This folder's figures, compared with the benchmarks' harness (each a ratio with its 95% interval
and verdict):

- calls A and B (``call*/window_cost.jsonl``, window_cost.py): a traced step over the untraced ones,
  each window of a DDP ResNet-50 on 2 H200s, with the CUDA calls' records kept (``calls``) or turned
  off (``off``), the arms alternated in one process (paired by window pair); call A's windows without
  a warm-up step, call B's with one;
- calls A, B and C (``call*/windows.result.json``, torchrun_windows): each window's traced step over
  an untraced one under ``gpudash record --trace-every 5``, without the warm-up step (A) and with it
  (B and C), unpaired (a window a value).

python docs/bench/h200x2-issue74i/summarize.py
"""

from __future__ import annotations

import json
import os
import re
import statistics
import sys
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
from benchmarks.harness.stats import ratio  # noqa: E402 - the repository's root first

HERE = Path(__file__).parent


def probe(call: str) -> dict[str, list[dict[str, object]]]:
    """A call's window_cost.py rows by arm, in order."""
    out: dict[str, list[dict[str, object]]] = {"calls": [], "off": []}
    for line in (HERE / call / "window_cost.jsonl").read_text().splitlines():
        row = json.loads(line)
        out[str(row["arm"])].append(row)
    return out


def traced_steps(call: str) -> list[float]:
    """The traced-step figures of a call's table of runs (torchrun_windows; call C's holds call B's
    runs, which it joined, and its own)."""
    table = (HERE / call / "windows.txt").read_text().split("traced runs that ended")[0]
    return [float(v) for v in re.findall(r"\| traced \| 0 \|[^\n]*?\| ([\d.]+)× \|", table)]


def main() -> None:
    for call in ("callA", "callB"):
        arms = probe(call)
        print(f"{call} (window_cost.py): a traced step over an untraced one, {len(arms['off'])} windows an arm")
        for arm, rows in arms.items():
            values = [float(str(r["ratio"])) for r in rows]
            calls = sorted({int(str(r.get("runtime", -1))) + int(str(r.get("driver", -1))) for r in rows})
            kernels = sorted({int(str(r.get("kernels", -1))) for r in rows})
            line = ", ".join(f"{v:.2f}" for v in values)
            print(f"  {arm}: {line} (median {statistics.median(values):.2f}); kernels {kernels}, CUDA calls {calls}")
        base = [float(str(r["ratio"])) for r in arms["calls"]]
        new = [float(str(r["ratio"])) for r in arms["off"]]
        print(" ", ratio("off over calls", base, new, higher_is_better=False).text)
    before, after = traced_steps("callA"), traced_steps("callC")
    for name, values in (("without a warm-up step (A)", before), ("with one (B, C)", after)):
        over = sum(v > 1.2 for v in values)
        line = ", ".join(f"{v:.2f}" for v in values)
        print(f"torchrun_windows, {name}: {line} (median {statistics.median(values):.2f}; {over} over 1.2×)")
    print(" ", ratio("with over without", before, after, pairs=False, higher_is_better=False).text)


if __name__ == "__main__":
    main()
