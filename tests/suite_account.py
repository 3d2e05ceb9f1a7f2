"""Where the suite's time goes: the account a run writes with ``GPUDASH_SUITE_ACCOUNT=FILE`` read
back. ``tests/conftest.py`` writes a line a test (its CPU seconds, its worker's and those of the
processes it started and waited for, and its wall seconds); ``tests/interpreter/sitecustomize.py`` a
line a process that exits through Python's exit (its own CPU seconds, its command, whether it
imported torch). Processes that end by a signal or ``os._exit`` (multiprocessing's children, a
killed job) write none; their CPU is in their test's line where it waited for them.

    GPUDASH_SUITE_ACCOUNT=/tmp/account.jsonl pytest -q
    python -m tests.suite_account /tmp/account.jsonl [--top 30]
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path
from typing import Any


def read(path: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The account's test lines and process lines."""
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [x for x in lines if "test_cpu_s" in x], [x for x in lines if "cpu_s" in x]


def by_file(tests: list[dict[str, Any]]) -> list[tuple[str, float, float, int]]:
    """Each test file's CPU and wall seconds and its count of tests, the costliest first."""
    cpu: dict[str, float] = {}
    wall: dict[str, float] = {}
    count: Counter[str] = Counter()
    for test in tests:
        name = str(test["test"]).split("::")[0]
        cpu[name] = cpu.get(name, 0.0) + float(test["test_cpu_s"])
        wall[name] = wall.get(name, 0.0) + float(test["wall_s"])
        count[name] += 1
    costliest = sorted(cpu.items(), key=lambda item: -item[1])
    return [(name, seconds, wall[name], count[name]) for name, seconds in costliest]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="where the suite's time went (GPUDASH_SUITE_ACCOUNT)")
    parser.add_argument("account", type=Path)
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args(argv)
    tests, processes = read(args.account)
    cpu = sum(float(t["test_cpu_s"]) for t in tests)
    wall = sum(float(t["wall_s"]) for t in tests)
    print(f"{len(tests)} tests: {cpu:.0f} s of CPU, {wall:.0f} s of wall time summed over the workers")
    torch = [p for p in processes if p.get("torch")]
    print(
        f"{len(processes)} processes exited through Python: {len(torch)} imported torch, "
        f"{sum(float(p['cpu_s']) for p in torch):.0f} s of CPU between them"
    )
    print("CPU s   wall s  tests  file")
    for name, seconds, wall_s, count in by_file(tests)[: args.top]:
        print(f"{seconds:6.0f}  {wall_s:6.0f}  {count:5d}  {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
