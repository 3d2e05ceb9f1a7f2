"""What a job's memory holds, by kind, from its lead rank's hooks (``gpudash/boot/gpudash_boot/memory_count.py``):
parameters, gradients and optimizer state (counted exactly), the activations saved for backward in a
sampled step, and on CUDA the caching allocator's allocated, reserved and peak bytes against the
GPU's total (on the CPU the process's resident set). ``JobMemory`` keeps the latest figures and
makes the ``measured`` event of ``what`` "memory": once they are all known, and at the job's end
(its peak). Torch-free."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpudash.core.memory_kinds import KINDS, NAMES, byte_count, size
from gpudash.core.memory_note import MemoryNote
from gpudash.core.protocol import MEMORY, Event, EventKind
from gpudash.core.textfmt import strip_controls

# the allocator's (CUDA: reserved_peak is the most it held from the GPU) or the process's (CPU)
COUNTERS = ("allocated", "reserved", "peak", "reserved_peak", "total", "free", "rss")  # free: the driver's
FIXED = ("params", "grads", "optimizer")  # the kinds a batch does not change (and frozen parameters, where any)
MIB = float(1 << 20)
CONTEXT_SHARE = 0.03  # of the GPU's memory, what CUDA's context and libraries take outside the allocator


@dataclass
class MemoryFigures:
    """Bytes by kind and the allocator's counters (None: not known)."""

    step: int = 0
    kinds: dict[str, int] = field(default_factory=dict)
    counters: dict[str, int] = field(default_factory=dict)
    activations_step: int = 0
    not_measured: str = ""  # why the activations are not known
    batch: int = 0  # samples a step of this rank (0: not known)
    lines: list[tuple[str, int]] = field(default_factory=list)  # the job's lines holding the activations
    passes: int = 1  # forward/backward passes in the sampled step (gradient accumulation: several)
    ranks: int = 1  # the job's data-parallel ranks: its batch and what fits are a rank's

    def line(self) -> str:
        """``memory: parameters 1.2 MiB · gradients 1.2 MiB · … · peak allocated 41.2 of 79.6 GiB …``"""
        parts = [f"{NAMES[k]} {size(v)}" for k in KINDS if (v := self.kinds.get(k)) is not None]
        c = self.counters
        if "peak" in c:
            whole = f" of {size(c['total'])}" if c.get("total") else ""
            a_rank = " a rank" if self.ranks > 1 else ""  # (a torchrun job's summary says the world's batch)
            at = f" at batch {self.pass_batch}{a_rank}" if self.pass_batch else ""
            parts.append(f"peak allocated {size(c['peak'])}{whole}{at}")
            if (most := self.fits()) is not None and (each := self._per_sample()) is not None:
                parts[-1] += f": batch up to about {most}{a_rank} fits ({size(each)} a sample at the peak)"
                if (outside := self._held_outside()) is not None:
                    parts[-1] += f", with {size(outside)} of the GPU held outside its allocator (other processes)"
            if "reserved_peak" in c:
                loose = (
                    f", {size(c['reserved_peak'] - c['peak'])} more than allocated"
                    if c["reserved_peak"] > c["peak"]
                    else ""
                )
                parts.append(f"reserved at the peak {size(c['reserved_peak'])}{loose}")
            elif "reserved" in c and "allocated" in c:
                parts.append(f"reserved {size(c['reserved'])} ({size(c['reserved'] - c['allocated'])} not allocated)")
        elif "rss" in c:
            parts.append(f"the process's resident set {size(c['rss'])}")
        text = "memory: " + " · ".join(parts)
        if self.kinds.get("activations") is not None:
            text += f" (activations: saved for backward in step {self.activations_step})"
            if self.lines:
                text += "; the lines that made them: " + "; ".join(f"{where} {size(n)}" for where, n in self.lines)
        elif self.not_measured:
            text += f" (activations: {self.not_measured})"
        return text

    @property
    def pass_batch(self) -> int:
        """Samples a forward/backward pass: the step's over its passes (gradient accumulation)."""
        return self.batch // max(1, self.passes)

    def fits(self) -> int | None:
        """The largest batch a pass that would fit the GPU: what its allocator could hold
        (``_budget``) less the fixed part (parameters, gradients, optimizer state), over what the
        peak holds a sample of the pass (``_per_sample``); None where a figure is missing (on the
        CPU: no GPU to fill)."""
        c, fixed, each = self.counters, self._fixed(), self._per_sample()
        if each is None or fixed is None or not c.get("total"):
            return None
        most = int((self._budget() - fixed) / each)
        return most if most > 0 else None

    def _budget(self) -> float:
        """What the job's allocator could hold: the GPU less ``CONTEXT_SHARE``, or less, where the
        driver's free bytes say other processes (or NCCL's buffers) hold more than that."""
        c = self.counters
        budget = c["total"] * (1 - CONTEXT_SHARE)
        if "free" in c and "reserved" in c:
            budget = min(budget, c["free"] + c["reserved"])
        return budget

    def _held_outside(self) -> int | None:
        """The GPU's bytes outside this job's allocator, where they bound what fits (None: they do not)."""
        c = self.counters
        if "free" not in c or "reserved" not in c or c["free"] + c["reserved"] >= c["total"] * (1 - CONTEXT_SHARE):
            return None
        return c["total"] - c["free"] - c["reserved"]

    def _fixed(self) -> int | None:
        if not all(k in self.kinds for k in FIXED):
            return None
        return sum(self.kinds[k] for k in FIXED) + self.kinds.get("frozen", 0)

    def _per_sample(self) -> float | None:
        """What the allocator's peak holds beyond the fixed part, a sample of the pass: activations,
        the backward's temporaries, the cache's rounding and splits — all of which grow with the batch
        (the reserved peak where known: what the job took from the GPU). The activations' sample
        must have counted the passes (gradient accumulation) first."""
        c, fixed, batch = self.counters, self._fixed(), self.pass_batch
        held = c.get("reserved_peak") or c.get("peak")
        if fixed is None or not held or batch <= 0 or self.kinds.get("activations") is None or held <= fixed:
            return None
        return (held - fixed) / batch

    def sample_fields(self) -> dict[str, float]:
        """The ``Sample`` fields (``mem_params_mib`` …) of what is known, in MiB."""
        out = {f"mem_{k}_mib": v / MIB for k, v in self.kinds.items() if k != "frozen"}  # (no column: the event's)
        if "peak" in self.counters:
            out["mem_peak_mib"] = self.counters["peak"] / MIB
        if "rss" in self.counters:
            out["mem_rss_mib"] = self.counters["rss"] / MIB
        return out

    def note(self) -> MemoryNote:
        """The "memory" event's data (run.json's ``memory``: ``MemoryNote.run_json``)."""
        return MemoryNote(
            dict(self.kinds),
            dict(self.counters),
            self.step,
            self.pass_batch,
            self.passes,
            self.fits(),
            self.not_measured,
            tuple(self.lines),
        )


class JobMemory:
    """``received(m)`` each memory message of the lead rank; ``event(time_s)`` the ``measured``
    event once every kind is known (or why activations are not); ``final(time_s)`` at the end."""

    def __init__(self) -> None:
        self.figures: MemoryFigures | None = None
        self._said = False

    def received(self, m: dict[str, Any]) -> None:
        fig = MemoryFigures(step=_int(m.get("step")))
        fig.kinds = {k: n for k in KINDS if (n := byte_count(m.get(k))) is not None}
        fig.counters = {k: n for k in COUNTERS if (n := byte_count(m.get(k))) is not None}
        fig.activations_step = _int(m.get("activations_step"))
        fig.not_measured = str(m.get("activations_not_measured") or "")
        fig.lines = _lines(m.get("lines"))
        fig.passes = max(1, _int(m.get("passes"), 1))
        self.figures = fig

    def event(self, time_s: float, batch: int = 0, ranks: int = 1) -> Event | None:
        """The first full figures (None: said already, or not all known yet); ``batch``: samples a
        step of the rank, for what would fit; ``ranks``: the job's data-parallel ranks."""
        fig = self.figures
        if fig is not None:
            fig.batch, fig.ranks = batch, ranks
        if self._said or fig is None or ("activations" not in fig.kinds and not fig.not_measured):
            return None
        self._said = True
        return _event(time_s, fig)

    def final(self, time_s: float, batch: int = 0, ranks: int = 1) -> Event | None:
        """The figures at the job's end (None: none came)."""
        if self.figures is None:
            return None
        self.figures.batch, self.figures.ranks = batch, ranks
        return _event(time_s, self.figures)


def _event(time_s: float, fig: MemoryFigures) -> Event:
    return Event(time_s, EventKind.MEASURED, what=MEMORY, message=fig.line(), data=fig.note())


def _lines(value: Any) -> list[tuple[str, int]]:
    """The hooks' ``[[line, bytes], …]``, its well-formed rows alone (it is another process's data)."""
    if not isinstance(value, list):
        return []
    rows = [(strip_controls(str(r[0]))[:200], _int(r[1])) for r in value if isinstance(r, list) and len(r) == 2]
    return [(where, n) for where, n in rows if where and n > 0][:8]


def _int(value: Any, default: int = 0) -> int:
    """A whole number of another process's message (not one: ``default``)."""
    n = byte_count(value)
    return default if n is None else n
