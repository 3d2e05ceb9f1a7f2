"""The race's decisions, on measured figures only (torch-free, no session): who leads, who drops
out and why. ``gpudash.tune.run`` measures; this module judges.

Candidates are ranked by samples/s (so batch sizes compare), each over every window it has had.
A candidate drops out when its interval lies clearly below the leader's: ``compare`` (the
sweep's and the report's statistics) calls it *slower* than the leader. Successive halving then
keeps at most a third of those left (``ETA``; at least ``MIN_KEPT``), the best by mean; the
next rung measures them ``GROWTH`` times as long. A candidate that failed drops out with its error.

Two shortcuts spare switches that cannot change the outcome (each written into tune.md's "Not
tried"): a runner-up variant gets only the knob stacks that led on its batch size's leading
variant (``followed_stacks``: knobs act on the kernels, variants on their order, so a stack
clearly behind on one is taken to be behind on the other); ``compile``, whose warm-up is tens of
seconds, is skipped on a stack that would need more than ``COMPILE_REACH`` times its speed to
reach the leader (``compile_out_of_reach``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpudash.stats.comparison import Comparison, Estimate, Verdict, compare
from gpudash.stats.fmt import fmt_ratio

ETA = 3  # each rung keeps about 1/ETA of its candidates
GROWTH = 2.0  # and measures them this many times longer
MIN_KEPT = 2  # a rung keeps at least this many (while that many are in the race)
MAX_RUNGS = 3  # rungs after the first look (the race ends sooner when one is left)
VARIANTS_KEPT = 2  # the first stage keeps at most this many variants per batch size
STACKS_FOLLOWED = 2  # a runner-up variant gets at most this many of the leading variant's stacks
# compile is raced on a stack only while the stack's mean times this reaches the leader's: above the
# most compile gave over its own stack in this project's measurements (docs/BENCHMARKS.md, "gpudash
# tune against the exhaustive sweep": vit_b_16, resnet50 and encdec on an H100, with intervals)
COMPILE_REACH = 1.5
# the winner is measured again while its interval is wider than this share of its mean: the
# verdicts' noise threshold (gpudash.stats.comparison), so a comparison with it can be decided
PRECISION = 0.02
EXTRA_ROUNDS = 2  # a candidate without an interval, or a winner short of PRECISION: measured at most this often again


@dataclass(frozen=True)
class Standing:
    """One candidate's figures so far (``speed``: samples/s over all its windows; None: failed or
    nothing measured)."""

    key: object
    speed: Estimate | None
    error: str = ""


@dataclass(frozen=True)
class Cut:
    """A rung's decision: who goes on (best first) and why each of the others stops."""

    kept: list[object]
    dropped: dict[object, str]


def leader(standings: list[Standing]) -> Standing | None:
    """The measured candidate with the highest mean (None: none measured)."""
    measured = [s for s in standings if s.speed is not None and not s.error]
    return max(measured, key=lambda s: s.speed.mean if s.speed else 0.0, default=None)


def against(lead: Standing, other: Standing) -> Comparison:
    """``other`` relative to ``lead`` (samples/s, other/lead)."""
    assert lead.speed is not None and other.speed is not None
    return compare(lead.speed, other.speed)


def cut(standings: list[Standing], keep: int | None = None) -> Cut:
    """Drop the failed and the clearly slower; then keep the ``keep`` best by mean (default: a
    third, rounded up, at least ``MIN_KEPT``)."""
    dropped: dict[object, str] = {}
    for s in standings:
        if s.error:
            dropped[s.key] = f"failed: {s.error}"
        elif s.speed is None:
            dropped[s.key] = "no samples"
    lead = leader(standings)
    alive = [s for s in standings if s.key not in dropped]
    if lead is None:
        return Cut([], dropped)
    for s in alive:
        if s is lead:
            continue
        c = against(lead, s)
        if c.verdict == Verdict.SLOWER:
            dropped[s.key] = f"clearly slower than the leader: {fmt_ratio(c)} of its samples/s"
    alive = sorted((s for s in alive if s.key not in dropped), key=lambda s: -(s.speed.mean if s.speed else 0.0))
    quota = keep if keep is not None else max(MIN_KEPT, math.ceil(len(alive) / ETA))
    for rank, s in enumerate(alive[quota:], start=quota + 1):
        c = against(lead, s)
        dropped[s.key] = f"rank {rank} of {len(alive)}, {fmt_ratio(c)} of the leader's samples/s (halving)"
    return Cut([s.key for s in alive[:quota]], dropped)


def variant_cut(standings: list[Standing], batch_of: dict[object, int]) -> Cut:
    """The first stage's decision, per batch size: drop what is clearly slower than that batch
    size's leader; keep at most ``VARIANTS_KEPT`` (a bigger batch's samples/s must not end a
    smaller one here: each batch size gets its own knobs)."""
    kept: list[object] = []
    dropped: dict[object, str] = {}
    for b in dict.fromkeys(batch_of[s.key] for s in standings):
        one = cut([s for s in standings if batch_of[s.key] == b], keep=None)
        kept += one.kept[:VARIANTS_KEPT]
        dropped.update(one.dropped)
        for key in one.kept[VARIANTS_KEPT:]:
            dropped[key] = f"not among the {VARIANTS_KEPT} fastest plain variants at batch {b}"
    return Cut(kept, dropped)


def settled(standings: list[Standing]) -> bool:
    """No one left to separate: at most one candidate, or every one within the leader's noise
    with intervals (more time would not name a clear winner soon)."""
    lead = leader(standings)
    if lead is None or len(standings) <= 1:
        return True
    return all(
        s is lead or (s.speed is not None and against(lead, s).verdict in (Verdict.NO_CHANGE, Verdict.WITHIN_NOISE))
        for s in standings
    ) and all(s.speed is not None and s.speed.has_interval for s in standings)


def imprecise(s: Standing) -> bool:
    """Whether ``s`` was measured but its interval is missing or wider than ±``PRECISION``."""
    if s.speed is None or s.error:
        return False
    width = s.speed.rel_half_width
    return width is None or width > PRECISION


def runner_up(lead: Standing, standings: list[Standing]) -> Standing | None:
    """The measured candidate closest behind ``lead`` (None: no other)."""
    return leader([s for s in standings if s is not lead])


def followed_stacks(stacks: list[Standing]) -> list[object]:
    """Of the leading variant's knob stacks, those a runner-up variant is tried with: the ones not
    clearly slower than the best of them, at most ``STACKS_FOLLOWED``, best first."""
    return cut(stacks, keep=STACKS_FOLLOWED).kept


def compile_out_of_reach(lead: Standing, base: Standing) -> str | None:
    """Why ``compile`` on ``base``'s stack is not raced (None: it is): ``base`` would need more
    than ``COMPILE_REACH`` times its samples/s to reach ``lead``'s."""
    if base.speed is None or base.error or lead.speed is None or base.speed.mean <= 0:
        return None  # nothing measured to judge by: race it
    need = lead.speed.mean / base.speed.mean
    if need <= COMPILE_REACH:
        return None
    return (
        f"its stack without compile ran at {base.speed.mean / lead.speed.mean:.2f}x the leader's samples/s; "
        f"compile would have to make it {need:.2f}x faster, more than {COMPILE_REACH:g}x, above what it has "
        "given any network measured here (--knobs ...,compile races it anyway)"
    )
