"""The candidates ``gpudash tune`` races, and their order. Torch-free.

Two kinds, in two stages:

- **variants**: every variant the device runs, plain (no knob), at every batch size;
- **knobs**, on the variants that survive the first stage: each knob of the pool alone (on the
  leading variant of each batch size: the best single knob is what the winner is compared with),
  and on every surviving variant the *stacks*: layout + autotuning (``channels_last``,
  ``cudnn_benchmark``: no number format changes), that + ``amp=bf16`` and ``tf32``, each of those
  + ``cuda_graph``, and the full stack + ``compile``. ``compile`` is never tried alone: its
  warm-up (tens of seconds) is spent only where the rest of the stack is on.

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

if TYPE_CHECKING:  # pragma: no cover
    from workloads.knobs import Knobs
    from workloads.registry import FamilyInfo

EXACT_STACK = ("channels_last", "cudnn_benchmark")  # layout and autotuning: no number format changes
FAST_STACK = (*EXACT_STACK, "amp", "tf32")
GRAPH, COMPILE = "cuda_graph", "compile"
GPU_BOUNDS = ("GPU-bound (compute)", "GPU-bound (memory)")  # where compile is raced unasked

# What each bound points to first (the diagnosis' words for them: gpudash.diagnosis.rules.Bound)
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
    stage: str  # "variant", "single" or "stack"

    @property
    def label(self) -> str:
        return self.config.label

    @property
    def key(self) -> tuple[str, int, str]:
        return (self.config.variant, self.config.batch_size, self.config.knobs)


def label_of(variant: str, knobs: Knobs) -> str:
    """``pipelined+amp=bf16+cuda_graph``: the variant and its knobs as ``sweep -v`` writes them."""
    return "+".join([variant, *(f"{n}={v}" if v != "on" else n for n, v in knobs.items())])


class CandidateMaker:
    """Builds a family's candidates, numbering them and collecting the refusals."""

    def __init__(self, info: FamilyInfo, device_type: str, pool: Iterable[tuple[str, str]]) -> None:
        self.info, self.device_type, self.pool = info, device_type, dict(pool)
        self.refusals: list[str] = []
        self.made: dict[tuple[str, int, str], Candidate] = {}

    def make(self, variant: str, batch_size: int, knob_names: Iterable[str], stage: str) -> Candidate | None:
        """The candidate (one already made is returned again); None when the workload refuses it."""
        from workloads.knobs import Knobs

        knobs = Knobs((n, self.pool[n]) for n in self.pool if n in set(knob_names))
        label = label_of(variant, knobs)
        why = knobs.refusal(self.info.variant(variant), self.device_type)
        if why is not None:  # said once per reason (it names the variant), not per stack that has the knob
            if why not in self.refusals:
                self.refusals.append(why)
            return None
        key = (variant, batch_size, knobs.text())
        if key not in self.made:
            config = Configuration(self.info.name, variant, label, batch_size, len(self.made), knobs.text())
            self.made[key] = Candidate(config, stage)
        return self.made[key]

    def variants(self, variants: Iterable[str], batch_sizes: Iterable[int]) -> list[Candidate]:
        """The first stage: every variant plain at every batch size."""
        out = [self.make(v, b, (), "variant") for b in batch_sizes for v in variants]
        return [c for c in out if c is not None]

    def knobs(self, survivors: list[Candidate], bound: str | None, with_compile: bool = True) -> list[Candidate]:
        """The second stage on the first one's survivors (each batch size's leader first): each
        knob alone on the leader, the stacks on every survivor (``compile``'s only when
        ``with_compile``); ordered for ``bound``."""
        out: list[Candidate | None] = []
        leaders: dict[int, Candidate] = {}
        for c in survivors:
            leaders.setdefault(c.config.batch_size, c)
        for c in leaders.values():
            out += [self.make(c.config.variant, c.config.batch_size, (n,), "single") for n in self.pool if n != COMPILE]
        for c in survivors:
            stacks = [s for s in self.stacks() if with_compile or COMPILE not in s]
            out += [self.make(c.config.variant, c.config.batch_size, s, "stack") for s in stacks]
        fresh = [c for c in dict.fromkeys(out) if c is not None and c not in survivors]
        return ordered(fresh, bound)

    def stacks(self) -> list[tuple[str, ...]]:
        """The knob stacks of the pool (each at least two knobs; duplicates once)."""
        exact = tuple(n for n in EXACT_STACK if n in self.pool)
        fast = tuple(n for n in FAST_STACK if n in self.pool)
        graph = (GRAPH,) if GRAPH in self.pool else ()
        compiled = (COMPILE,) if COMPILE in self.pool else ()
        tries = [exact, fast, exact + graph, fast + graph, fast + compiled]
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
    from workloads.knobs import parse_knobs

    return list(parse_knobs(knobs_text))
