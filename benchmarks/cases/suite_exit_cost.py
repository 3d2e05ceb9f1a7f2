"""The CPU a torch process spends on its exit, without and with the test suite's ``sitecustomize``
(``tests/interpreter/``: the collector frozen once every atexit handler has run), interleaved.

Each round runs, in a shuffled order, ``python -c "import torch, torch._dynamo"`` (what a job has
imported by its first optimizer step) with an empty ``PYTHONPATH`` and with ``tests/interpreter``
on it; the process writes its own CPU time as its last line, and the CPU it took in all (its
parent's ``RUSAGE_CHILDREN``) less that line is its exit. New over old: a 95% interval over the
pairs' log ratios, with its verdict. About 15 s a round on the 2-core machine."""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
from dataclasses import dataclass

from benchmarks.harness.context import Run
from benchmarks.harness.params import param
from benchmarks.harness.schedule import Schedule, rounds
from benchmarks.harness.stamp import ROOT
from benchmarks.harness.stats import ratio

PROCESS = (
    "import resource, sys, torch, torch._dynamo\n"
    "used = resource.getrusage(resource.RUSAGE_SELF)\n"
    "sys.stderr.write(f'CPU {used.ru_utime + used.ru_stime:.4f}\\n')\n"
)
SITE = str(ROOT / "tests" / "interpreter")


@dataclass(frozen=True)
class Params:
    rounds: int = param(8, "interleaved rounds")
    seed: int = param(0, "the shuffle's seed")


def exit_cpu_s(pythonpath: str) -> float:
    """CPU seconds a torch process takes after its last line, with ``pythonpath``."""
    env = {**os.environ, "PYTHONPATH": pythonpath, "OMP_NUM_THREADS": "1"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run([sys.executable, "-c", PROCESS], env=env, capture_output=True, text=True, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    whole = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return whole - float(done.stderr.rsplit("CPU ", 1)[1].split()[0])


def measure(run: Run, p: Params) -> None:
    arms = {"plain exit": lambda: exit_cpu_s(""), "the suite's exit": lambda: exit_cpu_s(SITE)}
    for arm in arms.values():  # one unmeasured run each: the page cache, the bytecode
        arm()
    got = rounds(arms, p.rounds, Schedule.PAIRS, seed=p.seed, each=lambda i, _: run.progress(f"round {i + 1} done"))
    old, new = got["plain exit"], got["the suite's exit"]
    run.values("plain exit", old, "s", higher_is_better=False)
    run.values("the suite's exit", new, "s", higher_is_better=False)
    table = run.table(
        ["exit of a torch process", "plain (median)", "the suite's (median)", "new/old (95% CI), verdict"]
    )
    f = run.keep("exit CPU", ratio("the suite's exit over a plain one", old, new, higher_is_better=False))
    said = f.text.split(": ", 1)[1]
    run.row(
        table, "CPU after the last line", f"{statistics.median(old):.2f} s", f"{statistics.median(new):.2f} s", said
    )
