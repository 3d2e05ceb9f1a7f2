"""Model FLOPs and MFU of the user's own job (``gpudash -- CMD``), on the CPU: the FLOPs of one
optimizer step counted inside the job (``gpudash/boot/gpudash_boot/step_flops.py``) from the end of
its first step to the end of its second, every sample's TFLOP/s and MFU from them
(``gpudash/job/mfu.py``), and the one "flops" event saying what was counted or why MFU is blank —
through the real command on real scripts, and the count's part alone for what a script cannot
arrange (another thread, a dispatch mode of the job's own, a FLOP formula that fails). ``torchrun``'s
ranks, each measured (tests/test_job.py's subject) and counted, share one recording; a plain loop's
FLOPs over ``--peak-tflops`` are read from tests/test_job.py's recording of ``--steps``, and those of
its accumulated micro-batches without a peak from its recording of two optimizers and accumulation."""

from __future__ import annotations

import csv
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils import flop_counter
from torch.utils._python_dispatch import TorchDispatchMode, _get_current_dispatch_mode_stack

from gpudash.boot.gpudash_boot import step_flops
from gpudash.core.protocol import Sample
from gpudash.job.mfu import job_count, missing
from gpudash.job.step_record import StepRecord
from gpudash.job.steps import JobSamples
from tests.helpers import cpu_backend, once_per_session
from tests.test_job import JOBS, PLAIN, events, gpudash, job_line, samples


def mlp_flops(batch: int, hidden: int, micro_batches: int = 1) -> int:
    """The analytic FLOPs of one step of plain_loop.py's MLP, Linear(16, H), ReLU, Linear(H, 1):
    forward 2·B·16·H + 2·B·H; backward twice that, less the first layer's input gradient."""
    forward = 2 * batch * 16 * hidden + 2 * batch * hidden
    backward = 2 * forward - 2 * batch * 16 * hidden
    return micro_batches * (forward + backward)


def flops_event(path: Path) -> dict[str, str]:
    (event,) = [e for e in events(path) if e["event_kind"] == "measured" and e["event_what"] == "flops"]
    return event


# -- through the real command ---------------------------------------------------------------------
@pytest.mark.slow
def test_a_compiled_jobs_step_is_counted_on_fake_tensors_as_its_eager_step_is(tmp_path: Path) -> None:
    """torch.compile'd (inductor where a C++ compiler is present), two micro-batches a step: the count
    of the uncompiled model on fake tensors of the step's shapes is the analytic count of both, and
    says how it was made and what it cost."""
    out = tmp_path / "r.csv"
    job = (sys.executable, PLAIN, "--steps", "30", "--compile", "--backend", cpu_backend(), "--accumulate", "2")
    done = gpudash("record", str(out), "-q", "--peak-tflops", "1", "--", *job)
    assert done.returncode == 0, done.stderr
    said = flops_event(out)["event_message"]
    assert said.startswith("model FLOPs: 71.7 kFLOP a step (fp32 100%); MFU over 1 TFLOP/s (--peak-tflops); "), said
    assert "counted as the uncompiled model's forward and backward on fake tensors of the step's shapes" in said
    assert "the count cost the job" in said
    rows = samples(out)
    assert int(rows[-1]["steps"]) == 30 and float(rows[-1]["flops_per_step"]) == mlp_flops(16, 32, micro_batches=2)
    assert any(float(r["mfu_pct"] or 0) > 0 for r in rows if r["flops_per_step"])  # (0 in a window of no step)


@pytest.mark.slow
def test_a_count_that_fails_says_one_line_and_the_job_and_its_step_counting_go_on(tmp_path: Path) -> None:
    out = tmp_path / "r.csv"
    job = [sys.executable, PLAIN, "--steps", "40", "--workers", "0"]
    done = gpudash("record", str(out), "-q", "--", *job, env={"GPUDASH_JOB_FAULT": "flops@stop"})
    assert done.returncode == 0, done.stderr
    said = [x for x in done.stderr.splitlines() if x.startswith("gpudash:")]
    assert said == ["gpudash: the model FLOPs count is off: InjectedFault: GPUDASH_JOB_FAULT=flops@stop"]
    rows = samples(out)
    assert job_line(done.stdout)["steps"] == "40" == rows[-1]["steps"]
    assert any(r["step_ms_p50"] for r in rows)  # its steps timed (a last window of one step has no percentiles)
    assert flops_event(out)["event_message"] == (
        "MFU blank: the step's FLOPs were not counted: the count failed: InjectedFault: GPUDASH_JOB_FAULT=flops@stop"
    )


@pytest.fixture(scope="module")
def torchrun(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """``torchrun`` of two ranks on gloo (30 steps of batches of 8 each) recorded with ``--peak-tflops 2``:
    its CSV and gpudash's run."""

    def record() -> tuple[Path, subprocess.CompletedProcess[str]]:
        torchrun = Path(sys.executable).with_name("torchrun")
        out = tmp_path_factory.mktemp("torchrun") / "r.csv"
        job = [str(torchrun), "--standalone", "--nproc-per-node", "2", str(JOBS / "ddp_loop.py"), "30"]  # a free port
        done = gpudash("record", str(out), "-q", "--peak-tflops", "2", "--", *job, env={"OMP_NUM_THREADS": "1"})
        assert done.returncode == 0, done.stderr
        return out, done

    return once_per_session(tmp_path_factory, "test_job_flops-torchrun", record)  # its tests may run in two workers


@pytest.mark.slow
def test_torchrun_measures_every_rank(torchrun: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    out, done = torchrun
    rows = samples(out)
    last = {k: rows[-1][k] for k in ("world_size", "steps", "batch_size", "samples")}
    assert last == {"world_size": "2", "steps": "30", "batch_size": "16", "samples": str(30 * 16)}, (
        last,
        done.stderr[-3000:],
    )  # samples: the global batch
    assert sorted(x for x in done.stdout.split() if x.startswith("rank=")) == ["rank=0", "rank=1"]
    with open(out, newline="") as f:
        every = list(csv.DictReader(f))
    ranks = [r for r in every if r["row_kind"] == "rank"]  # each rank's windows, side by side
    assert {r["rank"] for r in ranks} == {"0", "1"} and {r["node"] for r in ranks} == {"0"}
    (world,) = [r for r in every if r["event_what"] == "world"]  # which run, node and ranks gpudash saw
    assert world["event_before"] == "0" and "ranks 0, 1 of 2" in world["event_message"]


@pytest.mark.slow
def test_every_torchrun_rank_counts_its_own_step_and_mfu_is_per_gpu(
    torchrun: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    per_rank = 2 * 8 * 16 + 2 * 8 * 16  # DDP(Linear(16, 1)), batch 8 a rank: forward, weight gradient
    rows = samples(torchrun[0])
    assert rows and rows[-1]["world_size"] == "2"
    for row in rows:
        assert float(row["flops_per_step"]) == per_rank
        assert float(row["mfu_pct"]) == pytest.approx(100 * per_rank * float(row["steps_per_s"]) / 2e12, rel=1e-4)


# -- gpudash's side alone -------------------------------------------------------------------------
def test_the_event_says_the_flops_their_dtype_and_the_peak_or_why_mfu_is_blank() -> None:
    h100 = "NVIDIA H100 80GB HBM3"
    count = job_count({"flops": 3.1e12, "by_dtype": [["bf16", 3.1e12]], "device_name": h100, "why": ""}, None)
    assert count.message.startswith("model FLOPs: 3.1 TFLOP a step (bf16 100%); MFU over 989.5 TFLOP/s (H100 SXM bf16")
    note = count.note()
    assert note.dtype == "bf16" and note.flops_per_step == 3_100_000_000_000 and note.blank == ""
    assert note.peak_tflops == 989.5 and note.peak_source.startswith("H100 SXM bf16 dense")
    assert count.rates(10.0) == (3.1e12, 31.0, pytest.approx(100 * 31.0 / 989.5))
    mixed = job_count({"flops": 100, "by_dtype": [["bf16", 60], ["fp32", 40]], "device_name": h100}, None)
    assert mixed.message == (
        "model FLOPs: 100 FLOP a step (bf16 60%, fp32 40%); MFU blank: the step mixes dtypes, which has no single "
        "peak: give one with --peak-tflops"
    )
    assert mixed.note().dtype == "mixed" and mixed.note().peak_tflops is None
    assert mixed.note().blank == "the step mixes dtypes, which has no single peak: give one with --peak-tflops"
    assert mixed.rates(10.0) == (100.0, pytest.approx(1e-9), None)
    assert job_count({"flops": 100, "by_dtype": [["bf16", 60], ["fp32", 40]]}, 5.0).rates(1.0)[2] == pytest.approx(2e-9)
    graph = job_count({"why": "a CUDA graph was being captured before its first optimizer step"}, 5.0)
    assert graph.message == (
        "MFU blank: the step's FLOPs were not counted: a CUDA graph was being captured before its first optimizer step"
    )
    assert graph.rates(10.0) == (None, None, None) and graph.note().dtype == ""
    assert (
        graph.note().blank
        == "the step's FLOPs were not counted: a CUDA graph was being captured before its first optimizer step"
    )
    said = "MFU blank: the job made one step: the count is of a later one (its fourth, in most jobs)"
    assert missing(1).message == said


def test_every_window_after_the_count_carries_its_flops_rate_and_mfu() -> None:
    windows = JobSamples("job:x", "", 1.0, t0=0.0)
    windows.count = job_count({"flops": 2e12, "by_dtype": [["fp32", 2e12]]}, 4.0)
    for step in range(1, 21):
        windows.add(0, StepRecord(step, step * 0.1, 100.0, 8, 0, 0.0, None, False, 0.1 if step > 1 else None))
    out: list[Sample] = windows.flush()
    assert out and all(s.steps_per_s > 0 for s in out)
    for s in out:
        assert s.flops_per_step == 2e12 and s.tflops == pytest.approx(2 * s.steps_per_s)
        assert s.mfu_pct == pytest.approx(100 * 2 * s.steps_per_s / 4.0)


# -- the count's part alone, inside this process ------------------------------------------------------
@pytest.fixture
def part_module(monkeypatch: pytest.MonkeyPatch) -> Any:
    """The hooks' count (``gpudash_boot.step_flops``), no fault injected."""
    monkeypatch.delenv("GPUDASH_JOB_FAULT", raising=False)
    return step_flops


def _iteration(batch: int = 8, hidden: int = 32) -> Callable[[], torch.Tensor]:
    """One iteration of plain_loop.py's MLP: forward, backward, the optimizer's step."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(batch, 16)

    def iteration() -> torch.Tensor:
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    return iteration


def test_the_count_runs_from_one_step_end_to_the_next_and_leaves_no_mode(flops_sent: Any) -> None:
    part, messages = flops_sent
    iteration = _iteration()
    part.at_step("cpu", 3)
    assert part.running and len(_get_current_dispatch_mode_stack()) == 1  # the counting mode
    iteration()
    part.at_step("cpu", 3)
    assert not part.running and _get_current_dispatch_mode_stack() == []
    (message,) = messages
    assert message["k"] == "flops" and message["rank"] == 3 and message["why"] == ""
    assert message["flops"] == mlp_flops(8, 32) and message["by_dtype"] == [["fp32", mlp_flops(8, 32)]]
    assert message["device_name"] is None
    iteration()
    part.at_step("cpu", 3)
    assert len(messages) == 1  # counted once


def test_a_second_step_on_another_thread_gives_up_and_the_modes_go_at_a_later_step_of_their_own(
    flops_sent: Any,
) -> None:
    part, messages = flops_sent
    part.at_step("cpu", 0)
    _iteration()()
    other = threading.Thread(target=part.at_step, args=("cpu", 0))
    other.start()
    other.join()
    assert [m["why"] for m in messages] == ["the second optimizer step ran on another thread than the first"]
    assert "flops" not in messages[0] and not part.running
    assert len(_get_current_dispatch_mode_stack()) == 1  # this thread's: not to be left from another
    assert part.count.passing  # meanwhile it counts nothing: it only runs the operators
    part.at_step("cpu", 0)
    assert _get_current_dispatch_mode_stack() == [] and len(messages) == 1


class _JobsMode(TorchDispatchMode):
    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        return func(*args, **(kwargs or {}))


def test_a_dispatch_mode_of_the_jobs_own_over_the_count_is_left_alone(flops_sent: Any) -> None:
    part, messages = flops_sent
    part.at_step("cpu", 0)
    mode = _JobsMode()
    mode.__enter__()
    try:
        _iteration()()
        part.at_step("cpu", 0)
        assert _get_current_dispatch_mode_stack()[-1] is mode  # the job's, still its own
    finally:
        mode.__exit__(None, None, None)
    assert [m["why"] for m in messages] == ["the job entered a dispatch mode of its own during the counted step"]
    part.at_step("cpu", 0)
    assert _get_current_dispatch_mode_stack() == []


def test_a_flop_formula_that_raises_never_reaches_the_job_and_voids_the_count(
    flops_sent: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    part, messages = flops_sent
    expected = _iteration()()

    def boom(*args: Any, **kwargs: Any) -> int:
        raise ValueError("boom")

    monkeypatch.setitem(flop_counter.flop_registry, torch.ops.aten.addmm, boom)
    part.at_step("cpu", 0)
    assert torch.equal(_iteration()(), expected)  # the job's arithmetic, untouched
    part.at_step("cpu", 0)
    (message,) = messages
    assert message["why"] == "torch could not count an operator's FLOPs (ValueError: boom)" and "flops" not in message


def test_a_failure_in_the_count_leaves_its_modes_and_says_one_line(
    part_module: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GPUDASH_JOB_FAULT", "flops@stop")
    messages: list[dict[str, Any]] = []
    part = part_module.StepFlopsCount(torch, messages.append)
    part.at_step("cpu", 0)
    _iteration()()
    part.at_step("cpu", 0)
    assert _get_current_dispatch_mode_stack() == [] and not part.running
    assert (
        capsys.readouterr().err
        == "gpudash: the model FLOPs count is off: InjectedFault: GPUDASH_JOB_FAULT=flops@stop\n"
    )
    assert [m["why"] for m in messages] == ["the count failed: InjectedFault: GPUDASH_JOB_FAULT=flops@stop"]
