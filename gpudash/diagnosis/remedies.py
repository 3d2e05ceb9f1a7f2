"""What each fix is worth: for every limit a diagnosis window measured, how much faster the step
could be with that limit gone ("up to N×"), and the limit that would come next.

The step's parts come from the window (``Evidence``), each without the profiler's slowdown: the
untraced step's wall time and its wait for the next batch; the GPU's busy time a step (kernels
run at their speed under the profiler); the host's own time a step, its step marker less the
calls in which it waited for the GPU (a sync), scaled by the untraced step over the traced one
(the profiler slows the host); the collectives' exposed time (the traced steps' share of the step,
so never more than it). A step is modelled as its input wait plus the longer of the host's and
the GPU's work, a sync adding the GPU's time to the host's. Each remedy's figure is the step over
the step with its part gone — an upper bound of what the fix gives, never a promise — and its
"then" is the best remedy after it. Torch-free.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass

from gpudash.core.protocol import JOB_PREFIX, Event
from gpudash.diagnosis.rules import (
    SCRIPT_ADVICE,
    Bound,
    Diagnosis,
    Evidence,
    comm_advice,
    diagnose,
    gpu_advice,
    input_advice,
)

SHOWN_FROM = 1.05  # a remedy worth less than this is not named
INPUT, SYNCS, HOST, GPU, COMM = "input", "syncs", "host", "gpu", "all-reduce"
LIMIT_WORDS = {
    INPUT: "input-bound",
    SYNCS: "sync-bound",
    HOST: "host/launch-bound",
    GPU: "GPU-bound",
    COMM: "communication-bound",
}
KNOB_ADVICE = {  # a family's remedies, in gpudash's knobs
    INPUT: "more loader workers, pin_memory, decode or augment on the GPU",
    SYNCS: "keep the step free of .item(), .cpu() and data-dependent shapes",
    HOST: "cuda_graph or compile=reduce-overhead, or a larger batch",
    GPU: "faster arithmetic: amp=bf16, tf32, channels_last with cudnn_benchmark, compile",
    COMM: "a larger batch per rank, or fewer all-reduces (ddp_no_sync=K)",
}


@dataclass(frozen=True)
class Parts:
    """A step's measured parts, ms, without the profiler's slowdown (None: not measured here)."""

    step: float
    input: float
    host: float | None  # the host's own work a step, its waits for the GPU left out
    gpu: float | None  # the GPU's busy time a step
    comm: float | None  # the collectives' exposed time a step (the traced steps' share of this step)
    syncs: bool  # the host waits for the GPU inside the step

    @classmethod
    def of(cls, e: Evidence) -> Parts:
        loop = max(e.step_ms - e.input_ms, 0.0)
        host: float | None = None
        if e.host_ms_per_step is not None:
            own = max(0.0, e.host_ms_per_step - (e.host_wait_ms or 0.0))
            slowed = e.traced_step_ms / e.step_ms if e.traced_step_ms and e.step_ms > 0 else 1.0
            host = min(own / max(1.0, slowed), loop)
        elif e.gpu_ms_per_step is None:  # the CPU: the step's own work is the host's
            host = loop
        syncs = bool(e.syncs_per_step) and (e.host_wait_ms is None or e.host_wait_ms > 0)
        return cls(e.step_ms, e.input_ms, host, e.gpu_ms_per_step, e.comm_exposed_ms, syncs)

    def without(self, limit: str) -> Parts | None:
        """The step with ``limit``'s part gone; None where it was not measured or is not a part."""
        loop = self.step - self.input
        if limit == INPUT and self.input > 0:
            return dataclasses.replace(self, step=loop, input=0.0)
        if limit == COMM and self.comm:
            return dataclasses.replace(self, step=self.step - self.comm, comm=0.0)
        if self.host is None or self.gpu is None:
            return None
        if limit == SYNCS and self.syncs:
            return dataclasses.replace(self, step=self.input + max(self.host, self.gpu), syncs=False)
        if limit == HOST and self.host > self.gpu and not self.syncs:  # a step that syncs cannot be one graph
            return dataclasses.replace(self, step=self.input + self.gpu, host=self.gpu)
        if limit == GPU and self.gpu > self.host:  # the GPU is the longer of the two
            return dataclasses.replace(self, step=self.input + self.host, gpu=self.host)
        return None

    def worth(self, limit: str) -> tuple[float, Parts] | None:
        """How many times faster the step is without ``limit``'s part, and the step then."""
        after = self.without(limit)
        if after is None or after.step <= 0 or self.step / after.step < SHOWN_FROM:
            return None
        return self.step / after.step, after


@dataclass(frozen=True)
class Remedy:
    """One fix: the limit it removes, what to do, up to how many times faster, and what comes next."""

    limit: str
    advice: str
    up_to: float
    then: str

    def line(self) -> str:
        """ "up to 1.9× (input): more DataLoader workers …; then host/launch-bound (2.1 ms a step): …"."""
        then = f"; then {self.then}" if self.then else ""
        return f"up to {self.up_to:.2g}× ({self.limit}): {self.advice}{then}"

    def as_dict(self) -> dict[str, object]:
        return {"limit": self.limit, "advice": self.advice, "up_to": round(self.up_to, 3), "then": self.then}


def remedies(e: Evidence, bound: Bound, script: bool) -> list[Remedy]:
    """Each limit's remedy worth naming, the most worth first (``script``: in a training script's
    words, leaving out what the job already does; else in gpudash's knobs)."""
    parts = Parts.of(e)
    found = [(limit, got) for limit in LIMIT_WORDS if (got := parts.worth(limit)) is not None]
    found.sort(key=lambda item: item[1][0], reverse=True)
    return [
        Remedy(limit, _advice(limit, e, bound, script), up, _then(after, limit, e, bound, script))
        for limit, (up, after) in found
    ]


def _then(parts: Parts, done: str, e: Evidence, bound: Bound, script: bool) -> str:
    """The best remedy left once ``done``'s part is gone, in words ("" where none is worth naming)."""
    left = [(limit, got[0]) for limit in LIMIT_WORDS if limit != done and (got := parts.worth(limit)) is not None]
    if not left:
        return ""
    limit, up = max(left, key=lambda item: item[1])
    advice = _advice(limit, e, bound, script).split(": ", 1)[-1]
    return f"{LIMIT_WORDS[limit]} at {parts.step:.3g} ms a step: {advice}, up to {up:.2g}× more"


def _advice(limit: str, e: Evidence, bound: Bound, script: bool) -> str:
    if not script:
        return KNOB_ADVICE[limit]
    if limit == INPUT:
        return input_advice(e)
    if limit == GPU:
        return gpu_advice(e)
    if limit == COMM:
        return comm_advice(e)
    return SCRIPT_ADVICE[Bound.SYNC if limit == SYNCS else Bound.HOST]


def answer(e: Evidence, diagnosis: Diagnosis, script: bool) -> tuple[dict[str, object], list[str]]:
    """``diagnose``'s answer: the ``--json`` document's verdict with its ``remedies``, and the
    remedies' lines to print under the verdict's."""
    found = remedies(e, diagnosis.bound, script)
    return {**diagnosis.as_dict(e), "remedies": [r.as_dict() for r in found]}, [f"  {r.line()}" for r in found]


def has_evidence(event: Event) -> bool:
    """Whether a diagnosis event's details hold its window's evidence (``Evidence.details``); a
    replayed one's do not: the CSV keeps its line and its remedies (``with_remedies``)."""
    return all(f"diag_{name}" in event.details for name in ("steps", "step_ms", "input_ms"))


def of_event(event: Event) -> list[Remedy]:
    """A diagnosis event's remedies, from the evidence in its details (a job's in a script's words);
    none for an event without it."""
    if not has_evidence(event):
        return []
    e = Evidence.from_details(event.details)
    return remedies(e, diagnose(e).bound, script=event.details.get("workload", "").startswith(JOB_PREFIX))


def with_remedies(event: Event) -> Event:
    """A diagnosis event with its remedies in ``after``, as JSON (``--json``'s ``remedies``): the
    CSV's ``event_after``, which a replay reads back (``read``). As it came where none is named."""
    found = of_event(event)
    if not found:
        return event
    return dataclasses.replace(event, after=json.dumps([r.as_dict() for r in found], separators=(",", ":")))


def read(text: str) -> list[Remedy]:
    """The remedies in a diagnosis event's ``after`` (``with_remedies``); [] where it holds none or
    is not theirs (a recording is a hostile file)."""
    try:
        items = json.loads(text) if text.startswith("[") else []
        found = [Remedy(d["limit"], d["advice"], float(d["up_to"]), d["then"]) for d in items]
    except (ValueError, TypeError, KeyError, RecursionError):
        return []
    texts = all(isinstance(x, str) for r in found for x in (r.limit, r.advice, r.then))
    return found if texts and all(math.isfinite(r.up_to) and r.up_to > 0 for r in found) else []
