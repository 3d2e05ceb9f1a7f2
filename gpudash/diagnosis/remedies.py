"""What each fix is worth: for every limit a diagnosis window measured, how much faster the step
could be with that limit gone ("up to N×"), and the limit that would come next.

The step's parts and how a fix removes one are ``gpudash.diagnosis.parts``'; each remedy's figure is
the step over the step with its part gone — an upper bound of what the fix gives, never a promise —
and its "then" is the best remedy after it; its words are ``gpudash.diagnosis.advice``'. Torch-free.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gpudash.diagnosis.advice import remedy_advice
from gpudash.diagnosis.checks import Check, capped_up_to, loader_refuted, refuted_input_advice
from gpudash.diagnosis.evidence import Evidence, comm_kinds
from gpudash.diagnosis.parts import COMM, GPU, HOST, INPUT, SHOWN_FROM, SYNCS, WAIT, Parts
from gpudash.diagnosis.verdict import Bound, Diagnosis

LIMIT_WORDS = {  # each limit, in the words of the verdict it makes
    INPUT: "input-bound",
    SYNCS: "sync-bound",
    HOST: "host/launch-bound",
    GPU: "GPU-bound",
    COMM: "communication-bound",
    WAIT: "waiting for another rank",
}


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

    def as_dict(self, exact: bool = False) -> dict[str, Any]:
        """As ``--json`` says it (its worth to 3 places; ``exact``: as it is, for a recording)."""
        up_to = self.up_to if exact else round(self.up_to, 3)
        return {"limit": self.limit, "advice": self.advice, "up_to": up_to, "then": self.then}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Remedy:
        return cls(str(d["limit"]), str(d["advice"]), float(d["up_to"]), str(d["then"]))


def remedies(
    e: Evidence, bound: Bound, script: bool, checks: Sequence[Check] = (), ceiling: float | None = None
) -> list[Remedy]:
    """Each limit's remedy worth naming, the most worth first (``script``: in a training script's
    words, leaving out what the job already does; else in gpudash's knobs), within what the
    counterfactuals diagnose ran allow (``checks``: ``gpudash.diagnosis.checks``) and at most
    ``ceiling`` (the rank the world waits for: the others' pace)."""
    found = _worth(Parts.of(e), e, checks)
    return [
        Remedy(
            _label(limit, e),
            _advice(limit, e, script, checks),
            min(up, ceiling) if ceiling is not None else up,
            _then(after, limit, e, script, checks),
        )
        for limit, (up, after) in found
    ]


def _worth(
    parts: Parts, e: Evidence, checks: Sequence[Check], leave: str = ""
) -> list[tuple[str, tuple[float, Parts]]]:
    """Each limit (but ``leave``) worth naming, capped by the checks, the most worth first."""
    found = []
    for limit in LIMIT_WORDS:
        if limit == leave or (got := parts.worth(limit)) is None:
            continue
        up = capped_up_to(limit, got[0], checks, e.waited_rank)
        if up >= SHOWN_FROM:
            found.append((limit, (up, got[1])))
    found.sort(key=lambda item: item[1][0], reverse=True)
    return found


def _advice(limit: str, e: Evidence, script: bool, checks: Sequence[Check]) -> str:
    """A limit's remedy in words; an input remedy whose DataLoader settings were raced and lost says so."""
    if limit == INPUT and loader_refuted(checks):
        return refuted_input_advice(e, checks)
    return remedy_advice(limit, e, script)


def _label(limit: str, e: Evidence) -> str:
    """A limit as a remedy names it: communication by the kinds of collective it is ("communication:
    all-gather, reduce-scatter"), never a kind it is not."""
    if limit != COMM:
        return limit
    kinds = [kind for kind, ms in comm_kinds(e).items() if ms > 0]
    return f"{COMM}: {', '.join(kinds)}" if kinds else COMM


def _then(parts: Parts, done: str, e: Evidence, script: bool, checks: Sequence[Check] = ()) -> str:
    """The best remedy left once ``done``'s part is gone, in words ("" where none is worth naming)."""
    left = _worth(parts, e, checks, leave=done)
    if not left:
        return ""
    limit, (up, _) = left[0]
    advice = _advice(limit, e, script, checks).split(": ", 1)[-1]
    return f"{LIMIT_WORDS[limit]} at {parts.step:.3g} ms a step: {advice}, up to {up:.2g}× more"


def answer(
    e: Evidence, diagnosis: Diagnosis, script: bool, checks: Sequence[Check] = (), ceiling: float | None = None
) -> tuple[dict[str, object], list[str]]:
    """``diagnose``'s answer: the ``--json`` document's verdict with its ``remedies`` (and the
    ``checks`` it ran, which bound them; ``ceiling``: ``remedies``'), and the lines to print under the verdict's."""
    found = remedies(e, diagnosis.bound, script, checks, ceiling)
    lines = [f"  {r.line()}" for r in found] + [f"  {c.line()}" for c in checks]
    document = {**diagnosis.as_dict(e), "remedies": [r.as_dict() for r in found]}
    if diagnosis.bound == Bound.INPUT and loader_refuted(checks):  # the verdict's advice, as the race told
        document["advice"] = refuted_input_advice(e, checks)
    if checks:
        document["checks"] = [c.as_dict() for c in checks]
    return document, lines
