"""``gpudash --help`` and the dashboard's first frame, this checkout against another, interleaved.

``old`` is a folder holding another version's ``gpudash/`` and ``workloads/`` (a ``git worktree``
or ``git archive`` of an earlier commit); this checkout is the new one. Each round runs, in a
shuffled order, both trees' ``python -m gpudash --help`` (exec to exit) and ``python -m gpudash`` in
a pseudo-terminal (exec to the footer's "Quit" drawn; the workload then still imports torch in its
own process). New over old: the ratio of the means with its 95% interval and verdict (each round a
sample). About 15 s a round on a quiet machine."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.cases.shared.terminal import pty_first_frame
from benchmarks.harness.case import Unavailable
from benchmarks.harness.checkout import checkout_env, checkout_path
from benchmarks.harness.context import Run
from benchmarks.harness.params import param
from benchmarks.harness.schedule import Schedule, rounds
from benchmarks.harness.stamp import ROOT
from benchmarks.harness.stats import ratio


@dataclass(frozen=True)
class Params:
    old: str = param("", "the other tree (holding gpudash/ and workloads/)")
    rounds: int = param(15, "interleaved rounds")
    seed: int = param(0, "the shuffle's seed")


def help_s(tree: Path) -> float:
    """Seconds from exec to exit of ``python -m gpudash --help`` run from ``tree`` (-P: the working
    directory is not put first on sys.path, so PYTHONPATH picks the tree)."""
    t0 = time.perf_counter()
    env = {**checkout_env(tree), "PYTHONDONTWRITEBYTECODE": "1"}
    subprocess.run([sys.executable, "-P", "-m", "gpudash", "--help"], env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def first_frame_s(tree: Path) -> float:
    """Seconds from exec to the dashboard's footer on the terminal, ``tree``'s gpudash (nan: not seen)."""
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = checkout_env(tree)["PYTHONPATH"]
    try:
        seen = pty_first_frame([sys.executable, "-P", "-m", "gpudash"], b"Quit")[0]
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved
    return float("nan") if seen is None else seen


def measure(run: Run, p: Params) -> None:
    if not p.old:
        raise Unavailable("-p old=TREE: the other checkout to set against this one")
    trees = {"old": checkout_path(p.old), "new": ROOT}
    measures = {"gpudash --help": help_s, "first frame (python -m gpudash)": first_frame_s}
    for tree in trees.values():  # one unmeasured run each: the page cache, .pyc of the venv
        help_s(tree)
    arms = {f"{m}, {t}": (lambda m=m, t=t: measures[m](trees[t])) for m in measures for t in trees}
    got = rounds(arms, p.rounds, Schedule.PAIRS, seed=p.seed, each=lambda i, _: run.progress(f"round {i + 1} done"))
    table = run.table(["measure", "old median", "new median", "new/old (95% CI), verdict", "runs"])
    for m in measures:
        old = [v for v in got[f"{m}, old"] if v == v]  # a first frame not seen (nan) left out
        new = [v for v in got[f"{m}, new"] if v == v]
        run.values(f"{m}, old", old, "s", higher_is_better=False)
        run.values(f"{m}, new", new, "s", higher_is_better=False)
        if len(old) < 2 or len(new) < 2:
            run.row(table, m, "–", "–", "not enough runs", f"{len(old)} old, {len(new)} new")
            continue
        f = run.keep(m, ratio(f"{m}, new/old", old, new, pairs=False, higher_is_better=False))
        old_ms, new_ms = statistics.median(old) * 1000, statistics.median(new) * 1000
        said = f.text.split(": ", 1)[1]
        run.row(table, m, f"{old_ms:.0f} ms", f"{new_ms:.0f} ms", said, f"{len(old)}, {len(new)}")
