"""The collectives of a profiler window: which kernels are NCCL's, of which kind, and each one as
``Collective`` (its stream, when it ran, its bytes and the parts no computation ran beside), for
the figures of one rank's window and for matching a window across ranks
(``gpudash.engine.comm_split``). Torch-free."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gpudash.core.lenient import int_or
from gpudash.engine.intervals import Interval, event_interval, minus, union

OTHER = "other"
COLLECTIVE_KINDS = ("all-reduce", "all-gather", "reduce-scatter", "broadcast", "send/recv", OTHER)
# words in an NCCL kernel's name (lower case, without "_"), in the order they are tried, and its kind
KIND_WORDS = (
    ("allreduce", "all-reduce"),
    ("allgather", "all-gather"),
    ("reducescatter", "reduce-scatter"),
    ("broadcast", "broadcast"),
    ("send", "send/recv"),
    ("recv", "send/recv"),
)
DTYPE_BYTES = {"Float": 4, "Double": 8, "Half": 2, "BFloat16": 2, "Byte": 1, "Char": 1, "Bool": 1, "Int": 4, "Long": 8}
DTYPE_BYTES |= {"Short": 2, "Float8_e4m3fn": 1, "Float8_e5m2": 1}


def is_collective(name: str) -> bool:
    """A collective's kernel (NCCL's all-reduce, all-gather, …: ``ncclDevKernel_AllReduce_…``)."""
    return "nccl" in name.lower()


def collective_kind(name: str) -> str:
    """The kind (``COLLECTIVE_KINDS``) of a collective's kernel, from its name:
    ``ncclDevKernel_AllReduce_Sum_f32_RING_LL`` → "all-reduce", ``ncclKernel_AllGather_RING_LL_Sum_int8_t``
    → "all-gather", ``ncclDevKernel_SendRecv`` → "send/recv", ``ncclDevKernel_Reduce_…`` → "other"."""
    flat = name.lower().replace("_", "")
    return next((kind for word, kind in KIND_WORDS if word in flat), OTHER)


def kind_key(kind: str) -> str:
    """A kind as a detail's key: "all-reduce" → "all_reduce", "send/recv" → "send_recv"."""
    return kind.replace("-", "_").replace("/", "_")


@dataclass(frozen=True)
class Collective:
    """One collective's kernel on one rank: its kind, its stream, when it ran (µs), its bytes (None:
    not in the trace — a window without the host's operators) and the parts of it no computation
    kernel ran beside (µs, in order)."""

    kind: str
    stream: int
    start: float
    end: float
    nbytes: int | None = None
    uncovered: tuple[Interval, ...] = ()

    @property
    def dur(self) -> float:
        return self.end - self.start

    def exposed_within(self, last_us: float) -> float:
        """How much of its last ``last_us`` µs no computation kernel ran beside."""
        lo = self.end - last_us
        return sum(max(0.0, b - max(a, lo)) for a, b in self.uncovered if b > lo)


def collectives_of(kernels: Sequence[dict[str, Any]], span: Interval) -> tuple[Collective, ...]:
    """The collectives' kernels that end inside ``span``, in time order, with what of each no
    computation kernel ran beside."""
    compute = union(event_interval(k) for k in kernels if not is_collective(str(k.get("name", ""))))
    out = []
    for k in kernels:
        name = str(k.get("name", ""))
        if not is_collective(name):
            continue
        start, end = event_interval(k)
        if not span[0] < end <= span[1]:
            continue
        args = k.get("args") or {}
        uncovered = tuple(minus((start, end), compute))
        out.append(
            Collective(collective_kind(name), int_or(args.get("stream", -1), -1), start, end, _bytes(args), uncovered)
        )
    return tuple(sorted(out, key=lambda c: c.start))


def _bytes(args: dict[str, Any]) -> int | None:
    """The collective's buffer in bytes, from the kernel's args (the larger of its input and output:
    an all-gather's output, a reduce-scatter's input); None where the trace does not say."""
    size = DTYPE_BYTES.get(str(args.get("dtype", "")))
    counts = [v for key in ("In msg nelems", "Out msg nelems") if isinstance(v := args.get(key), int)]
    return max(counts) * size if size and counts and max(counts) > 0 else None
