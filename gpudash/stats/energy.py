"""Joules per step: the one definition, used by the CSV, the dashboard and reports.

J/step = (NVML energy counter at b − at a) / (steps done at b − at a), between two *marks*
(energy, steps) taken when a workload sample arrives, each joined with the newest NVML
sample. "Now" is over the last ``WINDOW_S`` seconds of marks; a configuration's figure is
over its first and last mark after warm-up. A mark is new only when the energy counter
moved (NVML ticks and samples do not line up: a sample joined to the same tick as the one
before would alias). Works the same on a live run and on a replayed CSV.
"""

from __future__ import annotations

from collections import deque

WINDOW_S = 2.0  # "now" spans about this many seconds of marks


def joules_per_step(e0: float, s0: int, e1: float, s1: int) -> float | None:
    """Energy per step between two marks; None while no step completed (or the counter reset)."""
    if s1 <= s0 or e1 < e0:
        return None
    return (e1 - e0) / (s1 - s0)


class EnergyPerStep:
    """J/step over a sliding window of marks; ``update`` at each workload sample."""

    def __init__(self, window_s: float = WINDOW_S) -> None:
        self.window_s = window_s
        self._marks: deque[tuple[float, float, int]] = deque()  # (time_s, energy_j, steps)
        self.value: float | None = None

    def update(self, time_s: float, energy_j: float | None, steps: int) -> float | None:
        """Take a mark (if the counter moved) and return J/step over the window."""
        if energy_j is None:
            return self.value
        marks = self._marks
        if marks and energy_j == marks[-1][1]:
            return self.value  # the same NVML tick as the last mark
        if marks and (energy_j < marks[-1][1] or steps < marks[-1][2]):
            marks.clear()  # the sampler switched GPU or the child restarted: start afresh
        marks.append((time_s, energy_j, steps))
        while len(marks) > 2 and marks[1][0] <= time_s - self.window_s:
            marks.popleft()
        _, e0, s0 = marks[0]
        self.value = joules_per_step(e0, s0, energy_j, steps)
        return self.value
