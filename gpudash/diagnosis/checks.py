"""What ``diagnose`` checks by running it, and what the checks do to its remedies. Torch-free, no
process started here (``gpudash.tune.checks_run`` runs them).

Two counterfactuals are cheap and safe enough to run after a diagnosis:

- **One rank** (a torchrun job of one node and more than one rank): the same script on one rank,
  which runs the per-rank step with no collective to wait in. Its steps/s over the world's bound
  what communication *and* waiting cost: "29.7 steps/s on 1 rank, 24.8 on 2 (1 rank 1.20×
  [1.11–1.29], faster): communication and waiting take at most 22% of each step". A communication
  remedy's "up to" is never above that ceiling (the top of its interval); a waiting remedy's
  neither, unless the rank the others wait for is the one that ran alone (rank 0 keeps its own
  extra work on one rank). A check without an interval bounds nothing, nor does one rank running
  slower than the world (the ranks split a global batch, or one rank does work for all: the
  per-rank step is not the same step). Skipped, with the reason, where one rank cannot be asked of
  the job from outside (not torchrun, several nodes) or where the job on one rank fails (it does
  not fit, it needs its world size).
- **A DataLoader setting** (a remedy of the input that names one): the job as written and with the
  setting, each a fresh recording, as ``gpudash tune`` races it — so diagnose and tune tell one
  story. Where none of the settings raced is faster, the input remedy says so, and what the wait is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gpudash.core.textfmt import plain
from gpudash.diagnosis.advice import HANDOVER_BYTES, WORKERS_IDLE, fewer_bytes, handover_parts
from gpudash.diagnosis.evidence import Evidence
from gpudash.diagnosis.parts import COMM, WAIT
from gpudash.stats.comparison import Comparison, Verdict
from gpudash.stats.fmt import fmt_ratio

ONE_RANK, LOADER = "one rank", "DataLoader"
MAX_LOADER_SETTINGS = 3  # the DataLoader settings of a remedy raced, at most


@dataclass(frozen=True)
class Check:
    """One counterfactual: what ran (``what``: "1 rank", "num_workers=8"), the job's rate and its
    rate (``unit``/s), and their comparison (the check over the job as run) — or why it did not run."""

    kind: str  # ONE_RANK or LOADER
    what: str
    comparison: Comparison | None = None
    job_rate: float | None = None
    rate: float | None = None
    unit: str = "steps"
    skipped: str = ""
    world: int = 1  # the job's ranks (one rank's check)

    @property
    def ceiling(self) -> float | None:
        """The most the check allows a remedy of its kind: the top of its ratio's interval; None
        where it did not run, has no interval, or does not bound one (``comparable``)."""
        c = self.comparison
        if c is None or not c.finite or c.high is None or c.low is None or not self.comparable:
            return None
        return c.high

    @property
    def comparable(self) -> bool:
        """Whether the check bounds what it is for: one rank running *slower* than the world, beyond
        its interval, does the world's work differently (a global batch split by the ranks, work
        that one rank does for all): its steps/s say nothing of the collectives' cost."""
        c = self.comparison
        return not (self.kind == ONE_RANK and c is not None and c.high is not None and c.high < 1.0)

    def line(self) -> str:
        """The check in words, for diagnose's output."""
        if self.skipped:
            return f"checked: {self._subject()}: skipped — {self.skipped}"
        c = self.comparison
        assert c is not None
        verdict = f"{fmt_ratio(c)}, {c.verdict}"
        if self.kind == ONE_RANK:
            rates = f"{_rate(self.rate)} {self.unit}/s on 1 rank, {_rate(self.job_rate)} on {self.world}"
            if not self.comparable:
                cost = "one rank runs slower, so the job's ranks do not each run the same step: no bound"
            elif self.ceiling is None:
                cost = "no interval yet, so no bound"
            else:
                cost = f"communication and waiting take at most {1.0 - 1.0 / max(1.0, self.ceiling):.0%} of each step"
            return f"checked: the same job on 1 rank: {rates} (1 rank {verdict}): {cost}"
        rates = f"{_rate(self.rate)} {self.unit}/s against {_rate(self.job_rate)} as written"
        return f"checked: {self.what}, raced as gpudash tune does: {rates} ({verdict})"

    def _subject(self) -> str:
        return "the same job on 1 rank" if self.kind == ONE_RANK else f"{self.what}, raced"

    def as_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"kind": self.kind, "what": self.what, "unit": self.unit}
        if self.skipped:
            return {**out, "skipped": self.skipped, "line": self.line()}
        c = self.comparison
        assert c is not None
        ratio = round(c.ratio, 4) if c.finite else None
        out |= {"job_rate": self.job_rate, "rate": self.rate, "ratio": ratio}
        out |= {"low": _rounded(c.low), "high": _rounded(c.high), "verdict": str(c.verdict), "line": self.line()}
        return out


def _rate(value: float | None) -> str:
    return plain(value, 3)


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


# -- a DataLoader setting --------------------------------------------------------------------------
def loader_settings(advice: str, e: Evidence, cpus: float) -> list[tuple[str, str]]:
    """The DataLoader settings an input remedy's ``advice`` names and the job lacks, as ``--set``
    pairs: more workers (twice as many, at least 2, at most ``cpus``: a rank's, as tune counts
    them; past them where the workers mostly wait, under ``WORKERS_IDLE`` of a CPU each), pinned
    memory, persistent workers. None where the advice names none, or rules them out
    (making less of each batch, the hand-over, workers that already have every CPU)."""
    have = e.job_settings or {}
    out: list[tuple[str, str]] = []
    workers = have.get("num_workers", "0")
    now = int(workers) if workers.isdigit() else 0
    waiting = now > 0 and e.input_workers_busy is not None and e.input_workers_busy < WORKERS_IDLE
    more = 2 * now if waiting else min(max(2, 2 * now), max(1, int(cpus)))  # (workers that wait: past the CPUs)
    if "more DataLoader workers" in advice and "not more DataLoader workers" not in advice and more > now:
        out.append(("num_workers", str(more)))
    if "pin_memory=True" in advice and have.get("pin_memory") != "True":
        out.append(("pin_memory", "True"))
    if "persistent_workers=True" in advice and now and have.get("persistent_workers") != "True":
        out.append(("persistent_workers", "True"))
    return out[:MAX_LOADER_SETTINGS]


# -- what the checks do to the remedies ------------------------------------------------------------
def capped_up_to(limit: str, up_to: float, checks: Sequence[Check], last_rank: int | None) -> float:
    """A remedy's "up to" within what the checks allow: a communication remedy's at most the one
    rank's ceiling; a waiting one's too, unless the rank waited for is rank 0 (the one that ran alone)."""
    base = limit.split(":", 1)[0]
    for check in checks:
        ceiling = check.ceiling
        if check.kind != ONE_RANK or ceiling is None:
            continue
        if base == COMM or (base == WAIT and last_rank != 0):
            up_to = min(up_to, ceiling)
    return up_to


def loader_refuted(checks: Sequence[Check]) -> bool:
    """Every DataLoader setting raced ran to a verdict with an interval, and none was faster."""
    raced = [c for c in checks if c.kind == LOADER and not c.skipped]
    verdicts = [c.comparison.verdict for c in raced if c.comparison is not None and c.comparison.high is not None]
    return bool(raced) and len(verdicts) == len(raced) and Verdict.FASTER not in verdicts


def refuted_input_advice(e: Evidence, checks: Sequence[Check]) -> str:
    """The input remedy's words where no raced DataLoader setting helped: so, and what the wait is
    (large batches: their hand-over, and fewer bytes; small ones: their making)."""
    raced = ", ".join(c.what for c in checks if c.kind == LOADER and not c.skipped)
    head = f"no DataLoader setting helps ({raced}: none faster, raced): the {e.input_ms:.2g} ms a step waits is the"
    if (e.input_batch_bytes or 0.0) >= HANDOVER_BYTES:
        size = f" of {e.input_batch_bytes / 1e6:.3g} MB" if e.input_batch_bytes else ""
        return f"{head} batches' hand-over{size} ({handover_parts(e)}) or their making: {fewer_bytes(e, cheaper=True)}"
    return (
        f"{head} batches' making or their hand-over: cheaper samples (less work in the Dataset's __getitem__ "
        "and its transforms), or fewer, larger batches"
    )
