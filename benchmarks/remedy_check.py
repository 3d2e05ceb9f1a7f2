"""Is a remedy's "up to N×" an honest upper bound? Issue 56's sync script, measured.

    python benchmarks/remedy_check.py [--pairs 5] [--steps 3000]      (CUDA)

``gpudash diagnose --json -- python tests/data/jobs/cuda_syncs.py`` gives the verdict, the syncs
remedy's ``up_to`` and the limit it names next. Then the script and its twin without the syncs
(``--no-syncs``: the loss summed on the GPU, read once) run bare, in interleaved pairs in a shuffled
order, each timing its own steps after a warm-up: what removing the syncs is really worth, the
geometric mean of the pairs' ratios with its 95% interval (``compare_paired``). Targets: the
estimate not below the measured gain (met unless the gain's interval lies wholly above it: an upper
bound), at most 1.5× (issue 56), and at most twice the measured gain (never several times what the
fix gives).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpudash.stats.comparison import compare_paired  # noqa: E402
from gpudash.stats.fmt import fmt_ratio  # noqa: E402

SCRIPT = ROOT / "tests" / "data" / "jobs" / "cuda_syncs.py"


def rate(extra: list[str], steps: int) -> float:
    """One bare run's own steps/s."""
    argv = [sys.executable, str(SCRIPT), str(steps), "--timed", *extra]
    done = subprocess.run(argv, capture_output=True, text=True, check=True)
    line = next(x for x in done.stdout.splitlines() if x.startswith("JOB "))
    return float(line.split("steps_per_s=")[1])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pairs", type=int, default=5)
    p.add_argument("--steps", type=int, default=3000)
    args = p.parse_args()
    import torch

    if not torch.cuda.is_available():
        print("remedy_check.py needs CUDA", file=sys.stderr)
        return 2
    argv = [sys.executable, "-m", "gpudash", "diagnose", "--json", "-q", "--warmup", "2", "--"]
    done = subprocess.run([*argv, sys.executable, str(SCRIPT), "100000000"], capture_output=True, text=True)
    verdict = json.loads(done.stdout)
    syncs = next((r for r in verdict["remedies"] if r["limit"] == "syncs"), None)
    order = random.Random(1)
    with_syncs: list[float] = []
    without: list[float] = []
    for _ in range(args.pairs):
        for side in order.sample(["with", "without"], 2):
            (with_syncs if side == "with" else without).append(
                rate([] if side == "with" else ["--no-syncs"], args.steps)
            )
    measured = compare_paired(with_syncs, without)
    now = dt.datetime.now().astimezone().isoformat(timespec="seconds")
    print(f"# remedy check on {torch.cuda.get_device_name()}; torch {torch.__version__}, {now}")
    print(f"# `python benchmarks/remedy_check.py {' '.join(sys.argv[1:])}`")
    print(f"verdict: {verdict['bound']}: {verdict['why']}")
    print()
    print(
        "| remedy | estimate (up to) | then | measured bare (no syncs / syncs) | upper bound | ≤ 1.5× | ≤ 2× the gain |"
    )
    print("|---|--:|---|--:|---|---|---|")
    if syncs is None:
        print(f"| syncs | not named (under 1.05×) | – | {fmt_ratio(measured)} {measured.verdict} | – | – | – |")
        return 0
    up = float(syncs["up_to"])
    # an upper bound unless the measured gain's interval lies above it
    bound = "not decided" if measured.low is None else "met" if up >= measured.low else "**not met**"
    print(
        f"| syncs | {up:.3g}× | {syncs['then'] or '–'} | {fmt_ratio(measured)} {measured.verdict} | {bound} "
        f"| {'met' if up <= 1.5 else '**not met**'} | {'met' if up <= 2 * measured.ratio else '**not met**'} |"
    )
    print()
    print("| pair | with syncs steps/s | without steps/s | ratio |")
    print("|--:|--:|--:|--:|")
    for i, (a, b) in enumerate(zip(with_syncs, without, strict=True), 1):
        print(f"| {i} | {a:.1f} | {b:.1f} | {b / a:.4f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
