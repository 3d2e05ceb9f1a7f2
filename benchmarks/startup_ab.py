"""`gpudash --help` and the dashboard's first frame, one tree against another, interleaved.

    .venv/bin/python benchmarks/startup_ab.py OLD_TREE [--rounds 15]

OLD_TREE is a folder holding another version's ``gpudash/`` and ``workloads/`` (a ``git
worktree`` or ``git archive`` of an earlier commit); this checkout is the new one. Each round runs,
in a shuffled order, both trees' ``python -m gpudash --help`` (exec -> exit) and ``python -m
gpudash`` in a pseudo-terminal (exec -> the footer's "Quit" drawn; the workload then still
imports torch in its own process). The table gives each median, and new/old as a ratio of means
with its 95% interval and verdict (``gpudash.stats.comparison``: the rounds are the samples).
About 15 s a round on a quiet machine.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # gpudash, and benchmarks.tui_frame beside this script

from benchmarks.tui_frame import pty_first_frame  # noqa: E402
from gpudash.stats.comparison import compare, estimate_from_batches  # noqa: E402


# -P: the working directory is not put first on sys.path, so PYTHONPATH picks the tree
def _env(tree: Path) -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=_path(tree), PYTHONDONTWRITEBYTECODE="1")


def _path(tree: Path) -> str:
    """``tree`` first, then whatever PYTHONPATH already held (where the dependencies may be)."""
    return os.pathsep.join(p for p in (str(tree), os.environ.get("PYTHONPATH", "")) if p)


def help_s(tree: Path) -> float:
    """Seconds from exec to exit of ``python -m gpudash --help`` run from ``tree``."""
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-P", "-m", "gpudash", "--help"], env=_env(tree), check=True, stdout=subprocess.DEVNULL
    )
    return time.perf_counter() - t0


def first_frame_s(tree: Path) -> float | None:
    """Seconds from exec to the dashboard's footer on the terminal, ``tree``'s gpudash."""
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = _path(tree)
    try:
        return pty_first_frame([sys.executable, "-P", "-m", "gpudash"], b"Quit")[0]
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("old", type=Path, help="the other tree (holding gpudash/ and workloads/)")
    ap.add_argument("--rounds", type=int, default=15, help="interleaved rounds (default: %(default)s)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    trees = {"old": args.old.resolve(), "new": ROOT}
    measures = {"gpudash --help": help_s, "first frame (python -m gpudash)": first_frame_s}
    times: dict[tuple[str, str], list[float]] = {(m, t): [] for m in measures for t in trees}
    rng = random.Random(args.seed)
    for tree in trees.values():  # one unmeasured run each: the page cache, .pyc of the venv
        help_s(tree)
    for r in range(args.rounds):
        order = [(m, t) for m in measures for t in trees]
        rng.shuffle(order)
        for m, t in order:
            value = measures[m](trees[t])
            if value is not None:
                times[(m, t)].append(value)
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    print(f"{'measure':<34} {'old median':>11} {'new median':>11}   new/old (95% CI), verdict")
    for m in measures:
        old, new = times[(m, "old")], times[(m, "new")]
        if len(old) < 2 or len(new) < 2:
            print(f"{m:<34} not enough runs ({len(old)} old, {len(new)} new)")
            continue
        c = compare(estimate_from_batches(old), estimate_from_batches(new), higher_is_better=False)
        low = f"{c.low:.3f}" if c.low is not None else "?"
        high = f"{c.high:.3f}" if c.high is not None else "?"
        verdict = str(c.verdict)
        print(
            f"{m:<34} {statistics.median(old) * 1000:>8.0f} ms {statistics.median(new) * 1000:>8.0f} ms"
            f"   {c.ratio:.3f} [{low}, {high}], {verdict}  (n={len(old)}, {len(new)})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
