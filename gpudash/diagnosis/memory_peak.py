"""The lines that hold a job's memory at its peak, from the CUDA caching allocator's history.

The job's hooks record a few steps with ``torch.cuda.memory._record_memory_history`` (Python
stacks, each allocation's) and dump ``torch.cuda.memory._snapshot()``; this module reads that
snapshot — plain dicts, lists, strings and numbers, unpickled with nothing else allowed — and
replays the recorded device's trace:

- the bytes allocated at the end are the snapshot's blocks in use; the bytes allocated when the
  recording began are those less every allocation since, plus every free since (the allocator's
  "allocated" counter moves at ``alloc`` and ``free_requested``, as ``max_memory_allocated``'s does);
- the peak is the largest running total over the trace, and what held it is every block allocated
  in the trace and not freed by then — each put to the job's own line that allocated it, found as
  a sync's line is (``gpudash.boot.gpudash_boot.sync_sites``: a library's line with the job's line that called
  it) — and what was allocated before the recording (the parameters, the optimizer's state, …);
- each line's kind from its stack: ``optimizer`` (under ``torch/optim``), ``backward`` (autograd's
  backward; no Python stack at all is autograd's engine thread), else ``forward``; an allocation of
  the engine's thread is put to the autograd node that made it, from the C++ frames the recording
  keeps too (``SoftmaxBackward0``, ``AccumulateGrad``, …).

Torch-free.
"""

from __future__ import annotations

import dataclasses
import io
import os
import pickle
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from gpudash.boot.gpudash_boot.sync_sites import Frame, site_of, with_text
from gpudash.boot.gpudash_boot.sync_table import Site
from gpudash.core.lenient import count_or
from gpudash.core.memory_kinds import byte_count, size

TOP_HOLDERS = 6  # lines named; the rest add up in one row
BEFORE = "before"  # the kind of what was allocated before the recording began
ENGINE = "backward"  # no Python stack: autograd's engine thread (backward's gradients and temporaries)
_OPTIMIZER_DIR = "torch/optim/"
_BACKWARD_FILES = ("torch/autograd/__init__.py", "torch/_tensor.py", "torch/autograd/graph.py")
_NODE = re.compile(r"autograd::generated::(\w+)::apply\(")  # a derivative torch generates: SoftmaxBackward0
_ENGINE_PARTS = {  # the engine's own work between nodes, by a C++ frame's words
    "AccumulateGrad::apply": "AccumulateGrad",
    "InputMetadata::reduce_grad": "a gradient summed to its input's shape",
    "InputBuffer::add": "gradients added up (InputBuffer)",
}
KIND_WORDS = {
    "forward": "forward",
    "backward": "backward",
    "optimizer": "optimizer",
    BEFORE: "parameters, optimizer state, …",
}


@dataclass(frozen=True)
class PeakHolder:
    """A line's bytes alive at the peak, or the bytes from before the recording (``site`` None)."""

    bytes: int
    kind: str  # forward, backward, optimizer, before
    site: Site | None = None
    blocks: int = 0  # the allocations it holds
    node: str = ""  # autograd's engine thread: the node that allocated (its C++ frames), where known

    @property
    def label(self) -> str:
        if self.site is None:
            if self.kind == BEFORE:
                return "allocated before the recording"
            return f"autograd's engine{': ' + self.node if self.node else ''} (no Python line)"
        caller = self.site.called_from
        text = f" {self.site.text}" if self.site.text else ""
        via = f" (from {caller.where}{' ' + caller.text if caller.text else ''})" if caller is not None else ""
        return f"{self.site.where}{text}{via}"

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"bytes": self.bytes, "kind": self.kind, "blocks": self.blocks}
        if self.site is not None:
            out["site"] = self.site.as_dict()
        if self.node:
            out["node"] = self.node
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PeakHolder:
        site = d.get("site")
        return cls(
            byte_count(d.get("bytes")) or 0,
            str(d.get("kind", "")),
            Site.from_dict(site) if isinstance(site, dict) else None,
            int(d.get("blocks") or 0),
            str(d.get("node") or "")[:80],
        )


@dataclass(frozen=True)
class MemoryPeak:
    """The recorded steps' peak and what held it, the most first."""

    peak_bytes: int
    start_bytes: int  # allocated when the recording began
    end_bytes: int  # ... and when it ended
    holders: list[PeakHolder] = field(default_factory=list)
    other_bytes: int = 0  # the lines past TOP_HOLDERS
    entries: int = 0  # the trace's allocations and frees
    truncated: bool = False  # the ring of entries was full: the earliest are lost

    def lines(self) -> list[str]:
        """``gpt.py:30 att = F.softmax(att, dim=-1)  4.5 GiB (forward)``, one a holder."""
        rows = [(h.label, h.bytes, KIND_WORDS.get(h.kind, h.kind)) for h in self.holders]
        if self.other_bytes:
            rows.append(("other lines", self.other_bytes, ""))
        width = min(72, max((len(label) for label, _, _ in rows), default=0))
        out = []
        for label, n, kind in rows:
            shown = label if len(label) <= width else label[: width - 1] + "…"
            out.append(f"  {shown:<{width}}  {size(n):>9}" + (f" ({kind})" if kind else ""))
        return out

    def summary(self) -> str:
        top = next((h for h in self.holders if h.site is not None), None)
        lead = f"; the most: {top.label} {size(top.bytes)} ({top.kind})" if top is not None else ""
        return f"peak allocated {size(self.peak_bytes)} in the recorded steps{lead}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "peak_bytes": self.peak_bytes,
            "start_bytes": self.start_bytes,
            "end_bytes": self.end_bytes,
            "holders": [h.as_dict() for h in self.holders],
            "other_bytes": self.other_bytes,
            "entries": self.entries,
            "truncated": self.truncated,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> MemoryPeak:
        holders = [PeakHolder.from_dict(h) for h in d.get("holders") or [] if isinstance(h, dict)]
        return cls(
            byte_count(d.get("peak_bytes")) or 0,
            byte_count(d.get("start_bytes")) or 0,
            byte_count(d.get("end_bytes")) or 0,
            holders,
            byte_count(d.get("other_bytes")) or 0,
            int(d.get("entries") or 0),
            bool(d.get("truncated")),
        )


@dataclass(frozen=True)
class PeakAnswer:
    """A memory window's answer, the ``memory_peak`` event's data: the peak and what held it, its
    lines as said (the job's, with the recording's cost a step), and the job's memory line."""

    KIND: ClassVar[str] = "memory_peak"
    peak: MemoryPeak
    lines: tuple[str, ...]
    memory: str = ""  # the job's memory by kind, where counted ("" otherwise)

    def as_dict(self) -> dict[str, Any]:
        return {"peak": self.peak.as_dict(), "lines": list(self.lines), "memory": self.memory}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PeakAnswer:
        lines = d["lines"]
        if not isinstance(lines, list) or not all(isinstance(x, str) for x in lines):
            raise TypeError(f"a memory answer's lines are text: {lines!r}")
        return cls(MemoryPeak.from_dict(d["peak"]), tuple(lines), str(d.get("memory") or ""))


class _PlainData(pickle.Unpickler):
    """Unpickles builtins' data only: a snapshot is dicts, lists, strings and numbers."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"not a memory snapshot: it holds {module}.{name}")


def read_snapshot(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The snapshot the job's hooks dumped (``torch.cuda.memory._snapshot()``, pickled)."""
    with open(path, "rb") as f:
        data = _PlainData(io.BufferedReader(f)).load()
    if not isinstance(data, dict) or not isinstance(data.get("device_traces"), list):
        raise ValueError("not a memory snapshot: no device_traces")
    return data


def peak_of(snapshot: dict[str, Any], device: int, max_entries: int = 0) -> MemoryPeak:
    """What held the recorded device's peak; ``max_entries``: the ring's size (0: not known)."""
    traces = snapshot.get("device_traces") or []
    trace = [e for e in (traces[device] if 0 <= device < len(traces) else []) if isinstance(e, dict)]
    # the blocks in use at the end by their size, as the allocator's counter (max_memory_allocated)
    # counts them; the trace's entries carry the bytes asked for, rounded up by < 512 B for a large
    # tensor: the peak of a real job's steps came out 508 bytes from its own max_memory_allocated
    end = sum(
        count_or(b.get("size"))
        for seg in snapshot.get("segments") or []
        if isinstance(seg, dict) and count_or(seg.get("device"), device) == device
        for b in seg.get("blocks") or []
        if isinstance(b, dict) and b.get("state") == "active_allocated"
    )
    moved = sum(_moved(e) for e in trace)
    start = max(0, end - moved)
    at = _peak_index(trace, start)
    alive, before_freed = _alive_at(trace, at)
    peak = start + sum(_moved(e) for e in trace[: at + 1]) if at >= 0 else start
    holders, other = _holders(alive.values(), max(0, start - before_freed))
    return MemoryPeak(peak, start, end, holders, other, len(trace), bool(max_entries and len(trace) >= max_entries))


def _moved(entry: dict[str, Any]) -> int:
    """The allocated counter's move at this entry."""
    action = entry.get("action")
    if action == "alloc":
        return count_or(entry.get("size"))
    if action == "free_requested":
        return -count_or(entry.get("size"))
    return 0


def _peak_index(trace: list[dict[str, Any]], start: int) -> int:
    """The entry after which the running total is largest (-1: never above the start)."""
    total, best, at = start, start, -1
    for i, entry in enumerate(trace):
        total += _moved(entry)
        if total > best:
            best, at = total, i
    return at


def _alive_at(trace: list[dict[str, Any]], at: int) -> tuple[dict[int, dict[str, Any]], int]:
    """The trace's allocations alive after entry ``at``, and the bytes from before it freed by then."""
    alive: dict[int, dict[str, Any]] = {}
    before_freed = 0
    for entry in trace[: at + 1]:
        action, addr = entry.get("action"), count_or(entry.get("addr"))
        if action == "alloc":
            alive[addr] = entry
        elif action == "free_requested":
            if alive.pop(addr, None) is None:
                before_freed += count_or(entry.get("size"))
    return alive, before_freed


def _holders(alive: Iterable[dict[str, Any]], before: int) -> tuple[list[PeakHolder], int]:
    """The alive allocations by the job's line, the most first, and the bytes of the rest."""
    sums: dict[tuple[Any, ...], list[Any]] = {}
    for entry in alive:
        frames = _frames(entry.get("frames"))
        site = site_of(frames) if frames else None
        if site is not None and site.package is None:  # the job's own line: one row, wherever it was called from
            site = dataclasses.replace(site, called_from=None)
        kind = _kind(frames)
        node = _node(entry.get("frames")) if not frames else ""
        key = (_key(site), kind, node)
        row = sums.setdefault(key, [0, 0, site, kind, node])
        row[0] += count_or(entry.get("size"))
        row[1] += 1
    rows = sorted(sums.values(), key=lambda r: -r[0])
    holders = [
        PeakHolder(n, kind, with_text(site) if site else None, blocks, node) for n, blocks, site, kind, node in rows
    ]
    if before:
        holders.append(PeakHolder(before, BEFORE))
        holders.sort(key=lambda h: -h.bytes)
    return holders[:TOP_HOLDERS], sum(h.bytes for h in holders[TOP_HOLDERS:])


def _frames(raw: Any) -> list[Frame]:
    """The Python frames of a stack, innermost first (a recording with C++ frames too, as
    ``stacks="all"`` makes, has them between: ``??``, ``RegisterCUDA_0.cpp``)."""
    out: list[Frame] = []
    for f in raw if isinstance(raw, list) else []:
        name = f.get("filename") if isinstance(f, dict) else None
        if isinstance(name, str) and (name.endswith(".py") or name.startswith("<")):
            out.append((name, count_or(f.get("line")), str(f.get("name", ""))))
    return out


def _node(raw: Any) -> str:
    """The autograd node whose C++ frames allocated (innermost first), or "" (no C++ frames kept)."""
    for f in raw if isinstance(raw, list) else []:
        name = f.get("name") if isinstance(f, dict) else None
        if not isinstance(name, str):
            continue
        if (found := _NODE.search(name)) is not None:
            return found[1]
        if (part := next((words for key, words in _ENGINE_PARTS.items() if key in name), None)) is not None:
            return part
    return ""


def _kind(frames: list[Frame]) -> str:
    if not frames:
        return ENGINE
    files = [name.replace(os.sep, "/") for name, _, _ in frames]
    if any(_OPTIMIZER_DIR in name for name in files):
        return "optimizer"
    backward = ("backward", "_engine_run_backward")
    if any(name.endswith(_BACKWARD_FILES) and f[2] in backward for name, f in zip(files, frames, strict=True)):
        return "backward"
    return "forward"


def _key(site: Site | None) -> tuple[Any, ...]:
    if site is None:
        return ()
    caller = site.called_from
    return (site.file, site.line, caller.file if caller else "", caller.line if caller else 0)
