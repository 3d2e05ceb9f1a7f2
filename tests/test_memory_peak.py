"""The lines that hold the allocator's peak, read from a snapshot of its history (torch-free: the
snapshots here are built as ``torch.cuda.memory._snapshot()`` lays them out, with the frames of a
real job file, ``tests/data/jobs/gpt_memory.py``; the GPU test reads a real one)."""

from __future__ import annotations

import datetime
import gzip
import importlib.util
import pickle
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpudash.diagnosis.memory_peak import BEFORE, MemoryPeak, peak_of, read_snapshot

JOB = str(Path(__file__).parent / "data" / "jobs" / "gpt_memory.py")
_SPEC = importlib.util.find_spec("torch")
TORCH = str(Path(_SPEC.origin).parent) if _SPEC is not None and _SPEC.origin else "/usr/lib/torch"
MIB = 1 << 20

SOFTMAX = [
    {"filename": f"{TORCH}/nn/functional.py", "line": 2100, "name": "softmax"},
    {"filename": JOB, "line": 33, "name": "forward"},
    {"filename": f"{TORCH}/nn/modules/module.py", "line": 1700, "name": "_call_impl"},
    {"filename": JOB, "line": 49, "name": "forward"},
    {"filename": JOB, "line": 72, "name": "main"},
]
HEAD = [{"filename": JOB, "line": 50, "name": "forward"}, {"filename": JOB, "line": 72, "name": "main"}]
ADAM = [
    {"filename": f"{TORCH}/optim/adamw.py", "line": 300, "name": "_single_tensor_adamw"},
    {"filename": JOB, "line": 76, "name": "main"},
]


def snapshot(trace: list[dict[str, Any]], alive_at_end: list[int]) -> dict[str, Any]:
    """A snapshot whose blocks in use at the end have these sizes, and this device-0 trace."""
    blocks = [{"size": n, "state": "active_allocated", "frames": []} for n in alive_at_end]
    blocks.append({"size": 64 * MIB, "state": "inactive", "frames": []})  # cached, not allocated
    return {
        "segments": [{"device": 0, "blocks": blocks, "total_size": sum(alive_at_end) + 64 * MIB}],
        "device_traces": [trace],
    }


def alloc(addr: int, size: int, frames: list[dict[str, Any]]) -> dict[str, Any]:
    return {"action": "alloc", "addr": addr, "size": size, "frames": frames, "stream": 0}


def free(addr: int, size: int) -> dict[str, Any]:
    return {"action": "free_requested", "addr": addr, "size": size, "frames": []}


def forward_then_backward() -> dict[str, Any]:
    """Parameters and Adam's state (300 MiB) from before; a forward whose softmax keeps 4 × 64 MiB and
    whose head keeps 32; a backward's temporaries (no Python stack) as the softmax outputs are freed."""
    trace = [alloc(1000 + i, 64 * MIB, SOFTMAX) for i in range(4)]
    trace += [alloc(2000, 32 * MIB, HEAD), alloc(3000, 16 * MIB, [])]  # peak: 300 + 256 + 32 + 16
    trace += [free(1000 + i, 64 * MIB) for i in range(4)] + [free(2000, 32 * MIB), free(3000, 16 * MIB)]
    trace += [alloc(4000, 8 * MIB, ADAM), free(4000, 8 * MIB)]
    return snapshot(trace, [200 * MIB, 100 * MIB])


def test_the_peak_is_the_running_totals_largest_and_its_lines_hold_it() -> None:
    peak = peak_of(forward_then_backward(), 0)
    assert (peak.start_bytes, peak.end_bytes, peak.peak_bytes) == (300 * MIB, 300 * MIB, 604 * MIB)
    top = peak.holders[0]
    assert top.kind == BEFORE and top.bytes == 300 * MIB and top.site is None
    softmax = peak.holders[1]
    assert (softmax.bytes, softmax.blocks, softmax.kind) == (256 * MIB, 4, "forward")
    assert softmax.site is not None and softmax.site.where == "gpt_memory.py:33"
    assert softmax.label == "gpt_memory.py:33 att = F.softmax(att, dim=-1)"
    assert [h.bytes for h in peak.holders] == [300 * MIB, 256 * MIB, 32 * MIB, 16 * MIB]
    assert peak.holders[3].label == "autograd's engine (no Python line)" and peak.holders[3].kind == "backward"
    assert sum(h.bytes for h in peak.holders) + peak.other_bytes == peak.peak_bytes
    text = "\n".join(peak.lines())
    assert "gpt_memory.py:33 att = F.softmax(att, dim=-1)" in text and "256 MiB (forward)" in text
    assert "the most: gpt_memory.py:33 att = F.softmax(att, dim=-1) 256 MiB (forward)" in peak.summary()


def test_an_optimizers_line_is_its_own_kind_and_the_peak_can_be_its() -> None:
    trace = [alloc(1, 10 * MIB, SOFTMAX), free(1, 10 * MIB), alloc(2, 40 * MIB, ADAM)]
    peak = peak_of(snapshot(trace, [100 * MIB, 40 * MIB]), 0)
    assert peak.peak_bytes == 140 * MIB
    assert [(h.kind, h.bytes) for h in peak.holders] == [(BEFORE, 100 * MIB), ("optimizer", 40 * MIB)]
    assert peak.holders[1].site is not None and peak.holders[1].site.where == "gpt_memory.py:76"


def test_memory_from_before_freed_before_the_peak_is_not_held_at_it() -> None:
    """A block allocated before the recording and freed in it (last step's activations, say)."""
    trace = [free(77, 50 * MIB), alloc(1, 30 * MIB, HEAD)]
    peak = peak_of(snapshot(trace, [100 * MIB, 30 * MIB]), 0)
    assert (peak.start_bytes, peak.peak_bytes) == (150 * MIB, 150 * MIB)  # the start is the peak
    assert [(h.kind, h.bytes) for h in peak.holders] == [(BEFORE, 150 * MIB)]


def test_a_full_ring_and_another_device_are_said() -> None:
    snap = forward_then_backward()
    assert peak_of(snap, 0, max_entries=len(snap["device_traces"][0])).truncated
    assert not peak_of(snap, 0, max_entries=10**6).truncated
    other = peak_of(snap, 3)  # not recorded: nothing in its trace, no blocks of it
    assert (other.peak_bytes, other.holders) == (0, [])


def test_the_peak_survives_its_dict_round_trip() -> None:
    peak = peak_of(forward_then_backward(), 0)
    again = MemoryPeak.from_dict(pickle.loads(pickle.dumps(peak.as_dict())))
    assert again.lines() == peak.lines() and again.summary() == peak.summary()


def test_a_snapshot_file_is_read_as_plain_data_only(tmp_path: Path) -> None:
    good, bad, wrong = tmp_path / "good.pickle", tmp_path / "bad.pickle", tmp_path / "wrong.pickle"
    good.write_bytes(pickle.dumps(forward_then_backward()))
    bad.write_bytes(pickle.dumps({"device_traces": [], "when": datetime.date(2026, 11, 26)}))
    wrong.write_bytes(pickle.dumps([1, 2]))
    assert peak_of(read_snapshot(good), 0).peak_bytes == 604 * MIB
    with pytest.raises(pickle.UnpicklingError, match="datetime"):
        read_snapshot(bad)
    with pytest.raises(ValueError, match="not a memory snapshot"):
        read_snapshot(wrong)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(1, 64), st.integers(0, 7)), max_size=60), st.integers(0, 500))
def test_the_peak_and_its_holders_agree_with_a_replay_by_hand(ops: list[tuple[bool, int, int]], start: int) -> None:
    """Any trace: the peak is the largest running total, and what holds it adds up to it."""
    trace: list[dict[str, Any]] = []
    alive: dict[int, int] = {}
    before = {10_000 + i: n for i, n in enumerate((start // 2, start - start // 2)) if n}
    total, best, addr = start, start, 0
    for is_alloc, size, pick in ops:
        if is_alloc:
            addr += 1
            alive[addr] = size
            trace.append(alloc(addr, size, [SOFTMAX, HEAD, ADAM][pick % 3] if pick < 6 else []))
            total += size
        else:
            victims = sorted(alive) + sorted(before)
            if not victims:
                continue
            victim = victims[pick % len(victims)]
            size = alive.pop(victim) if victim in alive else before.pop(victim)
            trace.append(free(victim, size))
            total -= size
        best = max(best, total)
    peak = peak_of(snapshot(trace, list(alive.values()) + list(before.values())), 0)
    assert peak.start_bytes == start and peak.end_bytes == total and peak.peak_bytes == best
    assert sum(h.bytes for h in peak.holders) + peak.other_bytes == best


def test_a_real_snapshots_peak_is_the_jobs_own_max_memory_allocated() -> None:
    """``torch.cuda.memory._snapshot()`` of a GPT-style job's steps 4 and 5 on an H100 (torch 2.11,
    C++ frames too: ``stacks="all"``), which printed ``max_memory_allocated=6286523904``: the replayed
    peak is that, to the allocator's rounding, and what held it is the job's lines by their bytes."""
    with gzip.open(Path(__file__).parent / "data" / "memory" / "gpt_steps.pickle.gz") as f:
        snap = pickle.load(f)
    peak = peak_of(snap, 0)
    assert peak.peak_bytes == pytest.approx(6286523904, rel=1e-6)
    assert peak.start_bytes == peak.end_bytes  # a steady step: what it allocates, it frees
    where = [h.site.where for h in peak.holders if h.site is not None]
    assert where[:3] == ["gpt_train.py:51", "gpt_train.py:78", "gpt_train.py:30"]
    # backward's, on autograd's own thread, put to the node that allocated by the C++ frames: the loss's
    engine = [h.label for h in peak.holders if h.site is None and h.kind == "backward"]
    assert engine == [
        "autograd's engine: NllLossBackward0 (no Python line)",
        "autograd's engine: LogSoftmaxBackward0 (no Python line)",
    ]
    assert sum(h.bytes for h in peak.holders) + peak.other_bytes == peak.peak_bytes
