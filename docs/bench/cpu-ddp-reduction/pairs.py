"""What gpudash costs a DDP job of short steps on gloo under two checkouts (session 21: a40a08b,
DDP's reduction timed at the end of the backward pass without a comm hook, against 5f175b3, DDP's
reference Python hook): ``ddp_short_steps.py`` bare, under ``gpudash record`` as this checkout has
it ("gpudash"), and under another (``--old PATH``: a worktree of it, put first on PYTHONPATH;
"before"), in rounds in a shuffled order; the ratios of their steps/s over bare with the benchmarks'
harness (paired by round: interval and verdict). And DDP's reference Python hook alone, without
gpudash (``hook``), in the same rounds.

python docs/bench/cpu-ddp-reduction/pairs.py --old /tmp/oldtree --rounds 6
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
from benchmarks.harness.stats import ratio  # noqa: E402 - the repository's root first

HERE = Path(__file__).parent
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
JOB = [*TORCHRUN, str(HERE / "ddp_short_steps.py")]


def median_ms(arm: str, old: str) -> float:
    """One run's median step (rank 0's), ms."""
    env = dict(os.environ)
    job = [*JOB, "hook" if arm == "hook" else "builtin"]
    if arm in ("gpudash", "before"):
        if arm == "before":
            env["PYTHONPATH"] = old + os.pathsep + env.get("PYTHONPATH", "")
        job = [sys.executable, "-m", "gpudash", "record", f"/tmp/ddp-short-{arm}.csv", "--force", "-q", "--", *job]
    out = subprocess.run(job, capture_output=True, text=True, env=env, timeout=300, check=True).stdout
    return float(next(line for line in out.splitlines() if line.startswith("median_ms")).split()[1])


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--old", required=True, help="a worktree of the checkout before the change")
    p.add_argument("--rounds", type=int, default=6)
    args = p.parse_args()
    arms = ("bare", "gpudash", "before", "hook")
    speed: dict[str, list[float]] = {arm: [] for arm in arms}
    rng = random.Random(0)
    for round_ in range(args.rounds):
        order = list(arms)
        rng.shuffle(order)
        for arm in order:
            speed[arm].append(1e3 / median_ms(arm, args.old))
        print(f"round {round_ + 1}: " + ", ".join(f"{a} {speed[a][-1]:.1f}" for a in arms), flush=True)
    for arm in ("gpudash", "before", "hook"):
        print(ratio(f"{arm} over bare (steps/s)", speed["bare"], speed[arm]).text)


if __name__ == "__main__":
    main()
