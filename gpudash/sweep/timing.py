"""Where a sweep's or a tune run's wall clock went: one ledger of parts, derived from the parent's
clock around each thing the measuring loop does and from the events the workload process sent.

The parts (``PARTS``; the keys of ``time_s.parts`` in sweep.json and tune.json):

- ``starting``: the workload process's start (torch's import, the first build), until "started";
- ``switching``: the changes between configurations (draining, rebuilding), sent to answered;
- ``compiling``: a knob's warm-up in the workload process (``compile``, ``cuda_graph``'s capture,
  ``cudnn_benchmark``'s autotuning): a switch's step whose answer runs knobs that warm up, or during
  which the engine reported one under way (its ``progress`` events), and the start's build from the
  first such report (the reports come every ``PROGRESS_EVERY_S`` from the build's beginning; a
  warm-up shorter than that at the start stays in ``starting``);
- ``warming_up``: after each change, the ``--warmup`` seconds whose samples are left out;
- ``measuring``: the windows whose samples make the figures;
- ``timing_stages`` and ``profiling`` (sweep): each stage alone, a ``--trace`` window;
- ``diagnosing`` and ``checking_loss`` (tune): the diagnosis windows, the loss check;
- ``stopping``: ending the workload process;
- ``other``: the rest of the wall clock (deciding, writing files, between the parts).

The parts add up to the wall clock. Torch-free.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from gpudash.core.protocol import Event, EventKind
from gpudash.engine.events import PROGRESS_EVERY_S

# (key, the label tune.md and sweep.md give it), in the order a run goes through them
PARTS = (
    ("starting", "starting the workload"),
    ("switching", "switching configurations"),
    ("compiling", "compiling, capturing, autotuning"),
    ("warming_up", "warming up"),
    ("measuring", "measuring"),
    ("timing_stages", "timing each stage alone"),
    ("profiling", "profiling"),
    ("diagnosing", "diagnosing"),
    ("checking_loss", "checking the loss"),
    ("stopping", "stopping the workload"),
    ("other", "other (deciding, writing)"),
)
PART_KEYS = tuple(key for key, _ in PARTS)
ANSWERS = (EventKind.CHANGED, EventKind.ERROR)  # what answers a switch's control


def warms_up(knobs_text: str) -> bool:
    """Whether ``knobs_text``'s knobs warm up in the workload process (``KnobInfo.warmup``)."""
    from workloads.knobs import parse_knobs

    try:
        return bool(parse_knobs(knobs_text).warmups)
    except ValueError:  # a knob this version does not know (WorkloadError is one)
        return False


def switch_warm_up_s(sent_s: float, events: list[Event]) -> float:
    """The seconds of a switch spent warming knobs up: each control's step, from the previous
    answer (the first: from ``sent_s``) to its own, when its answer runs knobs that warm up or the
    engine reported a warm-up under way during it. All times are the session's."""
    warm, begun, reported = 0.0, sent_s, False
    for e in events:
        if e.kind == EventKind.PROGRESS:
            reported = True
        elif e.kind in ANSWERS and e.what in ("variant", "batch_size", "knobs", "workload"):
            knobs = e.running.knobs if e.running is not None and e.kind == EventKind.CHANGED else ""
            if reported or warms_up(knobs):
                warm += max(0.0, e.time_s - begun)
            begun, reported = max(begun, e.time_s), False
    return warm


def start_warm_up_s(events: list[Event]) -> float:
    """The seconds of the start spent warming knobs up: from the build's beginning (the first
    ``progress`` report less its interval) to "started"; 0 without a report."""
    started = next((e.time_s for e in events if e.kind == EventKind.STARTED), None)
    first = next((e.time_s for e in events if e.kind == EventKind.PROGRESS), None)
    if started is None or first is None:
        return 0.0
    return max(0.0, started - (first - PROGRESS_EVERY_S))


@dataclass
class TimeLedger:
    """The seconds of each part (``PARTS``), and per configuration the seconds its switches took."""

    seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(PART_KEYS, 0.0))
    switch_s: dict[object, float] = field(default_factory=dict)

    def add(self, part: str, seconds: float) -> None:
        """``seconds`` of the wall clock went to ``part``."""
        assert part in self.seconds, part
        self.seconds[part] += max(0.0, seconds)

    @contextlib.contextmanager
    def timed(self, part: str) -> Iterator[None]:
        """The ``with`` block's wall-clock seconds go to ``part`` (also when it raises)."""
        t = time.monotonic()
        try:
            yield
        finally:
            self.add(part, time.monotonic() - t)

    def split(self, wall_s: float, part: str, warm_s: float) -> None:
        """``wall_s`` of ``part``, of which ``warm_s`` (at most all of it) went to ``compiling``."""
        warm = min(max(0.0, warm_s), max(0.0, wall_s))
        self.add("compiling", warm)
        self.add(part, wall_s - warm)

    def switched(self, wall_s: float, sent_s: float, events: list[Event], config: object) -> None:
        """A switch to ``config`` took ``wall_s``; ``events``: those seen while it waited."""
        self.split(wall_s, "switching", switch_warm_up_s(sent_s, events))
        self.switch_s[config] = self.switch_s.get(config, 0.0) + wall_s

    def measured(self, wall_s: float, began_s: float, opened_s: float) -> None:
        """A window took ``wall_s`` from ``began_s``; its samples counted from ``opened_s``
        (session times): the seconds before that are warming up."""
        warming = min(max(0.0, opened_s - began_s), max(0.0, wall_s))
        self.add("warming_up", warming)
        self.add("measuring", wall_s - warming)

    def as_dict(self, wall_s: float) -> dict[str, object]:
        """``time_s`` of the JSON: the wall clock and every part (``other``: the rest), 0.01 s."""
        parts = {k: round(v, 2) for k, v in self.seconds.items() if k != "other"}
        parts["other"] = round(max(0.0, wall_s - sum(parts.values())), 2)
        return {"wall": round(wall_s, 2), "parts": parts}

    def markdown(self, wall_s: float, what: str) -> list[str]:
        """The "Where the time went" section of ``what`` (tune.md, sweep.md)."""
        if wall_s <= 0:
            return []
        parts = self.as_dict(wall_s)["parts"]
        assert isinstance(parts, dict)
        shown = [(label, parts[key]) for key, label in PARTS if parts[key] > 0 or key == "measuring"]
        return [
            "## Where the time went",
            "",
            f"The {what} took {wall_s:.1f} s, from its start to its files:",
            "",
            *(f"- {label}: {sec:.1f} s ({100 * sec / wall_s:.0f}%)" for label, sec in shown),
            "",
            "*Compiling, capturing, autotuning*: a knob's warm-up in the workload process (compile, "
            "cuda_graph, cudnn_benchmark), at the start and in the switches; *warming up*: the "
            "`--warmup` seconds after each change, left out of the figures; *measuring*: the windows "
            "that make them. The JSON holds the same seconds under `time_s` (docs/usage.md).",
            "",
        ]
