"""How a case's arms take turns, written once: rounds in which every arm runs once (``rounds``, the
order shuffled for pairs, mirrored for ABBA), and single steps alternated one by one in blocks
(``alternate_steps``), which takes the host's drift out of a launch-bound step."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum

Measure = Callable[[], float]  # one arm's run: its figure (steps/s, ms a step, …)


class Schedule(str, Enum):
    """How a case alternates its arms."""

    PAIRS = "pairs"  # rounds of every arm once, in a shuffled order each round
    ABBA = "ABBA"  # rounds of every arm once, the order mirrored from one round to the next
    STEPS = "alternating steps"  # single steps (or stretches) alternated one by one, in blocks
    ONCE = "once"  # one measurement, or several without arms to compare

    def __str__(self) -> str:
        return self.value


def round_order(names: list[str], schedule: Schedule, index: int, rng: random.Random) -> list[str]:
    """The arms' order in round ``index`` (from 0)."""
    if schedule is Schedule.PAIRS:
        return rng.sample(names, len(names))
    if schedule is Schedule.ABBA and index % 2:
        return names[::-1]
    return list(names)


def rounds(
    arms: Mapping[str, Measure],
    n: int,
    schedule: Schedule,
    *,
    seed: int = 0,
    each: Callable[[int, dict[str, float]], None] | None = None,
) -> dict[str, list[float]]:
    """``n`` rounds of every arm once, in the schedule's order: each arm's values, a value a round.
    ``each(round, values)`` is called as each round ends (a row of a table, a line of progress)."""
    got: dict[str, list[float]] = {name: [] for name in arms}
    rng = random.Random(seed)
    for i in range(n):
        this: dict[str, float] = {}
        for name in round_order(list(arms), schedule, i, rng):
            this[name] = arms[name]()
            got[name].append(this[name])
        if each is not None:
            each(i, {name: this[name] for name in arms})
    return got


@dataclass(frozen=True)
class Alternated:
    """Two kinds of step alternated: each block's rate of each (steps/s), and each one's total seconds."""

    bare_rates: list[float]
    other_rates: list[float]
    bare_s: float
    other_s: float


def alternate_steps(bare: Callable[[], None], other: Callable[[], None], blocks: int, pairs: int) -> Alternated:
    """``bare`` and ``other`` alternated one by one, ``pairs`` pairs a block (the order flipping
    each pair), each timed on the host clock (on a launch-bound step the GPU keeps up, so host
    time is step time): a block's rate is its pairs over its seconds."""
    clock = time.perf_counter
    bare_rates, other_rates, bare_s, other_s = [], [], 0.0, 0.0
    for b in range(blocks):
        t_bare = t_other = 0.0
        for i in range(pairs):
            first = (b + i) % 2 == 0
            for is_other in (first, not first):
                t = clock()
                if is_other:
                    other()
                    t_other += clock() - t
                else:
                    bare()
                    t_bare += clock() - t
        bare_rates.append(pairs / t_bare)
        other_rates.append(pairs / t_other)
        bare_s, other_s = bare_s + t_bare, other_s + t_other
    return Alternated(bare_rates, other_rates, bare_s, other_s)
