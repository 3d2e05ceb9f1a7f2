"""Issue 63: the job's wire in one module (``gpudash_boot.wire``), read the same by both sides, and a
profiler window asked for while another runs is never lost between the thread that reads gpudash's
requests and the training thread."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import threading
from pathlib import Path
from typing import Any

import torch

from gpudash.boot.gpudash_boot import wire
from gpudash.boot.gpudash_boot.window import ProfilerWindow, cupti_teardown_safe
from gpudash.job.step_record import StepRecord


def test_a_record_in_the_wires_order_is_read_field_by_field() -> None:
    raw: list[Any] = [None] * len(wire.RECORD_FIELDS)
    named = {"step": 7, "t": 100.0, "ms": 12.5, "samples": 32, "tokens": 0, "input_wait_s": 0.002, "syncs": 1}
    named |= {"profiled": 0, "train_s": 0.013, "dataset_s": 0.001, "collate_s": 0.0005, "comm_ms": 4.0}
    named |= {"batch_bytes": 3 << 20, "phase_s": 0.25, "new_shape": 2}
    assert set(named) == set(wire.RECORD_FIELDS)
    for field, value in named.items():
        raw[wire.RECORD_FIELDS.index(field)] = value
    record = StepRecord.parse(raw)
    assert record is not None
    assert (record.step, record.ms, record.samples, record.syncs, record.comm_ms) == (7, 12.5, 32, 1, 4.0)
    assert record.batch_bytes == 3 << 20 and record.phase_s == 0.25 and record.new_shape and record.graphs_again
    assert record.own_ms is not None and abs(record.own_ms - 9.0) < 1e-9  # 13 ms of step less 4 of collectives
    # a collective longer than the step it is read at (NCCL's set-up in the first): no own work, not 0
    assert dataclasses.replace(record, comm_ms=40.0).own_ms is None


def test_a_window_asked_for_while_one_runs_starts_after_it(tmp_path: Path) -> None:
    sent: list[dict[str, Any]] = []
    window = ProfilerWindow(torch, sent.append, contextlib.nullcontext)
    first = {"k": wire.TRACE, "steps": 2, "dir": str(tmp_path), "name": "a"}
    window.ask(first)
    assert not window.at_step(1) and window.running  # started at this boundary
    asker = threading.Thread(target=window.ask, args=({**first, "name": "b"},))  # the flusher's thread
    asker.start()
    asker.join()
    torch.ones(4).sum()
    assert window.at_step(2) and window.running  # a's warm-up step (the profiler attached) ended
    assert window.at_step(3) and window.running  # a's first step marked
    assert window.at_step(4) and not window.running  # a ended: its trace sent
    assert not window.at_step(5) and window.running  # b, asked meanwhile, starts: not lost
    assert window.at_step(6) and window.running  # b warmed up, then the job ends
    window.close()
    paths = [m["path"] for m in sent if m.get("path")]
    assert paths == [wire.trace_path(str(tmp_path), "a", 0)] and Path(paths[0]).is_file()
    assert (sent[0]["steps"], len(sent[0]["step_ms"]), sent[0]["warmup_steps"]) == (2, 2, 1)
    marks = [e for e in json.loads(Path(paths[0]).read_text())["traceEvents"] if e.get("name") == "gpudash.step"]
    assert len(marks) == 2  # the warm-up step is not in the trace: its steps alone
    assert sent[-1]["error"] == "the job ended during the profiler window"  # b closed at the job's end


def test_cupti_is_torn_down_after_a_window_only_where_cuda_allows_it() -> None:
    """Left subscribed, CUPTI slows the job's launches after the window; torn down before CUDA 12.6
    its re-initialization could crash a job with CUDA graphs, so it is left as torch leaves it."""
    safe = cupti_teardown_safe

    def built_for(cuda: str | None) -> Any:
        return type("Torch", (), {"version": type("Version", (), {"cuda": cuda})})

    assert [safe(built_for(v)) for v in ("12.6", "13.0", "12.10")] == [True, True, True]
    assert [safe(built_for(v)) for v in ("12.4", "11.8", None)] == [False, False, False]


def test_a_profiler_that_will_not_record_after_its_warm_up_is_said_and_the_job_goes_on(tmp_path: Path) -> None:
    """The step after the warm-up starts the recording: where that fails, gpudash is told why, the
    profiler is stopped, and the next boundaries are plain ones (the hooks stay on)."""
    sent: list[dict[str, Any]] = []
    window = ProfilerWindow(torch, sent.append, contextlib.nullcontext)
    window.ask({"k": wire.TRACE, "steps": 2, "dir": str(tmp_path), "name": "a"})
    assert not window.at_step(1) and window.running  # started: its warm-up step
    assert window.window is not None
    prof = window.window["prof"]

    def refuse() -> None:
        raise RuntimeError("Kineto is stopped")

    prof.step = refuse
    assert window.at_step(2) and not window.running  # the warm-up step was the window's
    assert not window.at_step(3) and not window.running
    (said,) = sent
    assert said["error"] == "RuntimeError: Kineto is stopped" and said["steps"] == 0
