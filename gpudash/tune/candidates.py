"""The candidates ``gpudash tune`` races, and their order. Torch-free.

Two kinds, in two stages:

- **variants**: every variant the device runs, plain (no knob), at every batch size;
- **knobs**, on the variants that survive the first stage. On each batch size's leading variant:
  each knob of the pool alone (the best single knob is what the winner is compared with) and the
  *stacks*: layout + autotuning (``channels_last``, ``cudnn_benchmark``: no number format
  changes), that + ``amp=bf16`` and ``tf32``, each of those + ``cuda_graph``. A runner-up variant
  then gets only the stacks that led on the leading one (``follow``; which: ``gpudash.tune.race``).
  Last, ``compile`` on top of the fast stack (``compiled``), never alone: its warm-up (tens of
  seconds) is spent only where the rest of the stack is on, and only where it can still catch the
  leader (``gpudash.tune.race.compile_out_of_reach``).

``compile`` is raced when ``--knobs`` names it, or when the diagnosis of the plain run says the
GPU bounds the step (fusion shortens GPU work); a step bound by the host, the input or syncs
gains nothing from fusion that CUDA graphs do not give it without the warm-up.

A candidate the workload refuses (cuda_graph on a step that syncs, say) is not built; its reason
is listed once. The diagnosis of the plain run orders the second stage: what it points to first
(a host-bound step tries CUDA graphs first), so a budget that runs out leaves the least likely out.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpudash.sweep.plan import Configuration
from workloads.knobs import Knobs, label_of, parse_knobs  # torch-free

if TYPE_CHECKING:  # pragma: no cover
    from workloads.catalog_types import FamilyInfo

EXACT_STACK = ("channels_last", "cudnn_benchmark")  # layout and autotuning: no number format changes
FAST_STACK = (*EXACT_STACK, "amp", "tf32")
GRAPH, COMPILE = "cuda_graph", "compile"
GPU_BOUNDS = ("GPU-bound (compute)", "GPU-bound (memory)")  # where compile is raced unasked

# What each bound points to first (the diagnosis' words for them: gpudash.diagnosis.verdict.Bound)
FIRST_FOR_BOUND: dict[str, tuple[str, ...]] = {
    "host/launch-bound": (GRAPH, COMPILE),
    "CPU-bound": (GRAPH, COMPILE),
    "GPU-bound (compute)": ("amp", "tf32", COMPILE, "channels_last"),
    "GPU-bound (memory)": ("channels_last", "amp", COMPILE),
}


@dataclass(frozen=True)
class Candidate:
    """One configuration of the race: its ``Configuration`` and which stage made it."""

    config: Configuration
    stage: str  # "variant", "current" (what runs now: --current), "single" or "stack"

    @property
    def label(self) -> str:
        return self.config.label

    @property
    def key(self) -> tuple[str, int, str]:
        return (self.config.variant, self.config.batch_size, self.config.knobs)


class CandidateMaker:
    """Builds a family's candidates, numbering them and collecting the refusals."""

    def __init__(self, info: FamilyInfo, device_type: str, pool: Iterable[tuple[str, str]]) -> None:
        self.info, self.device_type, self.pool = info, device_type, dict(pool)
        self.refusals: list[str] = []
        self.made: dict[tuple[str, int, str], Candidate] = {}

    def make(self, variant: str, batch_size: int, knob_names: Iterable[str], stage: str) -> Candidate | None:
        """The candidate (one already made is returned again); None when the workload refuses it."""
        knobs = self._knobs(knob_names)
        why = knobs.refusal(self.info.variant(variant), self.device_type)
        if why is not None:  # said once per reason (it names the variant), not per stack that has the knob
            if why not in self.refusals:
                self.refusals.append(why)
            return None
        return self._made(variant, batch_size, knobs, stage)

    def current(self, variant: str, knobs_text: str, batch_size: int) -> Candidate:
        """The configuration that runs now, its knobs as they are (checked by ``--current``'s parse,
        not taken from the pool); the plain variant's own candidate where it has no knob."""
        return self._made(variant, batch_size, Knobs(parse_knobs(knobs_text).items()), "current")

    def _made(self, variant: str, batch_size: int, knobs: Knobs, stage: str) -> Candidate:
        """The candidate of ``variant`` at ``batch_size`` with ``knobs``, numbered as it is first made."""
        key = (variant, batch_size, knobs.text())
        if key not in self.made:
            config = Configuration(
                self.info.name, variant, label_of(variant, knobs), batch_size, len(self.made), knobs.text()
            )
            self.made[key] = Candidate(config, stage)
        return self.made[key]

    def variants(self, variants: Iterable[str], batch_sizes: Iterable[int]) -> list[Candidate]:
        """The first stage: every variant plain at every batch size."""
        out = [self.make(v, b, (), "variant") for b in batch_sizes for v in variants]
        return [c for c in out if c is not None]

    def knobs(self, leaders: list[Candidate], bound: str | None) -> list[Candidate]:
        """The second stage on each batch size's leading variant: each knob of the pool alone
        (``compile`` never alone) and every stack but ``compile``'s; ordered for ``bound``."""
        out: list[Candidate | None] = []
        for c in leaders:
            v, b = c.config.variant, c.config.batch_size
            out += [self.make(v, b, (n,), "single") for n in self.pool if n != COMPILE]
            out += [self.make(v, b, s, "stack") for s in self.stacks()]
        fresh = [c for c in dict.fromkeys(out) if c is not None and c not in leaders]
        return ordered(fresh, bound)

    def follow(self, runner_up: Candidate, leader: Candidate, kept: Iterable[Candidate]) -> list[Candidate]:
        """The stacks for ``runner_up``'s variant and batch size: those of ``kept`` (the stacks
        that led on ``leader``'s variant) and those ``leader``'s variant refused (nothing was
        measured against them: ``cuda_graph`` on a step that syncs, say)."""
        v, b = runner_up.config.variant, runner_up.config.batch_size
        names = [tuple(_names(s.config.knobs)) for s in kept]
        names += [s for s in self.stacks() if (leader.config.variant, b, self._knobs(s).text()) not in self.made]
        out = [self.make(v, b, n, "stack") for n in names]
        return [c for c in dict.fromkeys(out) if c is not None]

    def compile_base(self, on: Candidate) -> Candidate | None:
        """The stack ``compile`` goes on at ``on``'s variant and batch size: the fast stack (None:
        not made, or ``compile`` is not in the pool)."""
        if COMPILE not in self.pool:
            return None
        return self.made.get((on.config.variant, on.config.batch_size, self._knobs(self._fast).text()))

    def compiled(self, on: Candidate) -> Candidate | None:
        """``compile`` on top of the fast stack at ``on``'s variant and batch size (None: not in
        the pool, or refused)."""
        if COMPILE not in self.pool:
            return None
        return self.make(on.config.variant, on.config.batch_size, (*self._fast, COMPILE), "stack")

    @property
    def _fast(self) -> tuple[str, ...]:
        """The fast stack's knobs that are in the pool."""
        return tuple(n for n in FAST_STACK if n in self.pool)

    def _knobs(self, knob_names: Iterable[str]) -> Knobs:
        """The pool's values of ``knob_names``, in the pool's order."""
        names = set(knob_names)
        return Knobs((n, self.pool[n]) for n in self.pool if n in names)

    def stacks(self) -> list[tuple[str, ...]]:
        """The knob stacks of the pool but ``compile``'s (each at least two knobs; duplicates once)."""
        exact, fast = tuple(n for n in EXACT_STACK if n in self.pool), self._fast
        graph = (GRAPH,) if GRAPH in self.pool else ()
        tries = [exact, fast, exact + graph, fast + graph]
        kept = [s for s in tries if len(s) >= 2]
        return list(dict.fromkeys(tuple(sorted(s)) for s in kept))


def ordered(candidates: list[Candidate], bound: str | None) -> list[Candidate]:
    """``candidates`` with those holding a knob the diagnosis points to first (in its order), then
    the rest as made; ``compile`` last unless the diagnosis points to it (its warm-up is long)."""
    first = FIRST_FOR_BOUND.get(bound or "", ())

    def rank(c: Candidate) -> tuple[int, int]:
        names = set(_names(c.config.knobs))
        hits = [i for i, n in enumerate(first) if n in names]
        if hits:
            return (0, min(hits))
        return (2, 0) if COMPILE in names else (1, 0)

    return sorted(candidates, key=rank)  # stable: the order made within each rank


def _names(knobs_text: str) -> list[str]:
    """The knob names of a knobs text (``none``: none)."""
    return list(parse_knobs(knobs_text))
