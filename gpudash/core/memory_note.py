"""What a job's "memory" event says, typed (its ``data``): the bytes its memory holds by kind and the
allocator's counters, the step they were read at, the batch they are of and what batch would fit,
and the job's lines holding its activations. ``gpudash.job.memory`` makes it; the dashboard's bar
and run.json's ``memory`` read it whole. Torch-free."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

# run.json's name of each counter: the allocator's peak, reserved peak, the process's resident set
COUNTER_KEYS = {"peak": "peak_allocated_bytes", "reserved_peak": "peak_reserved_bytes", "rss": "rss_bytes"}


@dataclass(frozen=True)
class MemoryNote:
    """Bytes by kind (params, grads, optimizer, activations, …) and by counter (allocated, reserved,
    peak, reserved_peak, total, rss), as a job's hooks or a family's sample measured them."""

    KIND: ClassVar[str] = "memory"
    kinds: dict[str, int] = field(default_factory=dict)
    counters: dict[str, int] = field(default_factory=dict)
    step: int = 0  # the step they were read at (0: a family's sample)
    batch: int = 0  # samples a pass of the rank (0: not known)
    passes: int = 1  # forward/backward passes in the sampled step
    fits_batch: int | None = None  # the largest batch that would fit (None: not known)
    not_measured: str = ""  # why the activations are not known
    lines: tuple[tuple[str, int], ...] = ()  # the job's lines holding the activations, with their bytes

    def run_json(self) -> dict[str, Any]:
        """run.json's ``memory`` object: ``params_bytes`` …, the counters' (``peak_allocated_bytes`` …),
        the step, batch and what fits, and ``activation_lines`` as ``[[line, bytes], …]``."""
        out: dict[str, Any] = {f"{k}_bytes": v for k, v in self.kinds.items()}
        out.update({COUNTER_KEYS.get(k, f"{k}_bytes"): v for k, v in self.counters.items()})
        if self.not_measured:
            out["activations_not_measured"] = self.not_measured
        if self.lines:
            out["activation_lines"] = [[where, n] for where, n in self.lines]
        out["step"] = self.step
        if self.batch:
            out["batch"] = self.batch
        if self.passes > 1:
            out["passes"] = self.passes
        if self.fits_batch is not None:
            out["fits_batch"] = self.fits_batch
        return out

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)  # (its tuples JSON writes as lists: ``from_dict`` reads them back)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> MemoryNote:
        """``as_dict``'s object back; TypeError where a field is not of its kind (a hostile file)."""
        kinds, counters = _bytes_of(d["kinds"]), _bytes_of(d["counters"])
        lines = tuple((str(where), _whole(n)) for where, n in d.get("lines") or ())
        fits = d.get("fits_batch")
        return cls(
            kinds,
            counters,
            _whole(d.get("step", 0)),
            _whole(d.get("batch", 0)),
            _whole(d.get("passes", 1)),
            None if fits is None else _whole(fits),
            str(d.get("not_measured") or ""),
            lines,
        )


def _whole(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"not a whole number: {value!r}")
    return value


def _bytes_of(d: Any) -> dict[str, int]:
    if not isinstance(d, dict):
        raise TypeError(f"not bytes by name: {d!r}")
    return {str(k): _whole(v) for k, v in d.items()}
