"""The allocator's history on request: the job's side (``gpudash_boot.memory_history``: when it records, what it
sends, that it never leaves the recording on) and the whole path on the CPU (``gpudash diagnose
--memory`` says it needs CUDA, one line, non-zero). CUDA's allocator cannot run here: its history API is
faked at ``torch.cuda.memory``'s boundary, as NVML is at ``pynvml``'s; the GPU tests run the real one."""

from __future__ import annotations

import pickle
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from gpudash.boot.gpudash_boot import memory_history
from gpudash.diagnosis.memory_peak import peak_of, read_snapshot
from tests.helpers import run_gpudash

ROOT = Path(__file__).resolve().parents[1]
MLP = ROOT / "tests" / "data" / "jobs" / "memory_mlp.py"


class FakeAllocator:
    """``torch.cuda.memory``'s history calls, as CUDA's caching allocator answers them."""

    def __init__(self, own_trace: bool = False) -> None:
        self.calls: list[Any] = []
        self.on = own_trace
        self.trace = [{"action": "alloc", "addr": 1, "size": 4096, "frames": []}]

    def _record_memory_history(self, enabled: Any = "all", **kw: Any) -> None:
        self.calls.append((enabled, kw))
        self.on = enabled is not None

    def _snapshot(self) -> dict[str, Any]:
        blocks = [{"size": 4096, "state": "active_allocated"}]
        return {"segments": [{"device": 0, "blocks": blocks}], "device_traces": [self.trace if self.on else []]}


def fake_torch(allocator: FakeAllocator) -> Any:
    import torch

    return SimpleNamespace(cuda=SimpleNamespace(memory=allocator, current_device=lambda: 0), device=torch.device)


def history(allocator: FakeAllocator) -> tuple[Any, list[dict[str, Any]]]:
    sent: list[dict[str, Any]] = []
    h = memory_history.MemoryHistory(fake_torch(allocator))
    h.send = sent.append
    return h, sent


def test_it_records_the_steps_asked_from_the_step_named_and_turns_the_history_off(tmp_path: Path) -> None:
    allocator = FakeAllocator()
    h, sent = history(allocator)
    h.ask({"steps": 2, "dir": str(tmp_path), "at": 4})
    for step in (1, 2, 3):
        h.at_step(step, "cuda:0")
    assert not h.running and allocator.calls == []  # not before the step named
    h.at_step(4, "cuda:0")
    assert h.running and allocator.calls[0][0] == "all" and allocator.calls[0][1]["stacks"] == "all"
    h.at_step(5, "cuda:0")
    assert h.running and not sent
    h.at_step(6, "cuda:0")  # two steps recorded: dumped, the history off
    assert allocator.calls[-1][0] is None and not allocator.on
    assert h.running  # the next step follows the dump: gpudash's time too
    h.at_step(7, "cuda:0")
    assert not h.running
    (message,) = sent
    assert (message["k"], message["steps"], message["device"]) == ("mempeak", 2, 0) and "error" not in message
    assert peak_of(read_snapshot(message["path"]), 0).peak_bytes == 4096
    assert Path(message["path"]).parent == tmp_path


def test_another_ranks_recording_marks_this_ranks_same_steps_and_records_nothing(tmp_path: Path) -> None:
    """With torchrun the lead rank records; the others wait for its slowed steps in their collectives:
    gpudash asks them to mark the same steps, and the one the lead's dump slows, as gpudash's — the
    lead's own steps marked the same way (above) — on the CPU too, recording and sending nothing."""
    allocator = FakeAllocator()
    h, sent = history(allocator)
    h.ask({"steps": 2, "dir": str(tmp_path), "at": 4, "mark": True})
    marked = []
    for step in range(1, 9):
        h.at_step(step, "cpu")
        marked.append(h.running)  # the step under way after this boundary is gpudash's
    assert marked == [False, False, False, True, True, True, False, False]
    assert allocator.calls == [] and sent == []
    h.ask({"steps": 2, "dir": str(tmp_path), "at": 10, "mark": True})
    h.close()  # the job ends first: nothing to say for another rank's recording
    assert sent == []


def test_on_the_cpu_it_says_it_needs_cuda_and_records_nothing(tmp_path: Path) -> None:
    allocator = FakeAllocator()
    h, sent = history(allocator)
    h.ask({"steps": 2, "dir": str(tmp_path), "at": 1})
    h.at_step(1, "cpu")
    assert not h.running and allocator.calls == []
    assert "needs CUDA" in sent[0]["error"] and sent[0]["path"] == ""


def test_a_job_recording_its_own_history_is_left_alone(tmp_path: Path) -> None:
    allocator = FakeAllocator(own_trace=True)
    h, sent = history(allocator)
    h.ask({"steps": 2, "dir": str(tmp_path), "at": 1})
    h.at_step(1, "cuda:0")
    assert allocator.calls == [] and allocator.on  # its recording untouched
    assert "records the allocator's history itself" in sent[0]["error"]


def test_a_job_ending_before_its_recording_began_says_so() -> None:
    allocator = FakeAllocator()
    h, sent = history(allocator)
    h.ask({"steps": 2, "dir": "/nowhere", "at": 40})
    h.at_step(3, "cuda:0")
    h.close()
    assert sent[0]["error"] == "the job ended before the allocator's recording began" and allocator.calls == []


def test_an_unanswered_request_frees_the_next_after_a_while(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpudash.job import memory_history

    peaks = memory_history.JobMemoryPeaks()
    peaks.ask(2, "/tmp", lead_steps=10)
    assert peaks.busy  # asked: the next waits
    monkeypatch.setattr(memory_history.time, "monotonic", lambda: peaks.asked_at + memory_history.ANSWER_WAIT_S + 1)
    assert not peaks.busy  # its hooks went off, say: the key works again
    peaks.received({"rank": 0, "steps": 0, "path": "", "error": "needs CUDA"})
    assert not peaks.pending and [r.error for r in peaks.done()] == ["needs CUDA"]


def test_a_job_ending_mid_recording_turns_the_history_off(tmp_path: Path) -> None:
    allocator = FakeAllocator()
    h, sent = history(allocator)
    h.ask({"steps": 3, "dir": str(tmp_path), "at": 1})
    h.at_step(1, "cuda:0")
    h.close()
    assert not allocator.on and not h.running
    assert sent[0]["error"] == "the job ended during the allocator's recording"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_diagnose_memory_on_a_cpu_job_says_it_needs_cuda_in_one_line() -> None:
    job = [sys.executable, str(MLP), "--steps", "400"]
    done = run_gpudash("diagnose", "--memory", "-q", "--", *job, cwd=ROOT, env={"PYTHONUNBUFFERED": "1"})
    errors = [line for line in done.stderr.splitlines() if line.startswith("gpudash: error")]
    assert done.returncode == 1 and done.stdout == ""
    assert errors == [
        "gpudash: error: the allocator's history: needs CUDA (its caching allocator keeps the "
        "history); this job runs on the CPU"
    ]
    assert "Traceback" not in done.stderr


def test_the_snapshot_written_is_torchs_pickle_of_plain_data(tmp_path: Path) -> None:
    """What the hooks dump is what gpudash reads, with nothing but builtins allowed in it."""
    allocator = FakeAllocator()
    h, sent = history(allocator)
    h.ask({"steps": 1, "dir": str(tmp_path), "at": 1})
    h.at_step(1, "cuda:0")
    h.at_step(2, "cuda:0")
    with open(sent[0]["path"], "rb") as f:
        assert pickle.load(f) == allocator._snapshot() | {"device_traces": [allocator.trace]}
