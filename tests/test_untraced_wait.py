"""Issue 74: the wait for a straggler is the ranks' untraced one — measured where it happens (gloo's
on the host, NCCL's on the GPU's stream), not a profiler window's — and it is the verdict wherever
it is the step's largest part: on the CPU as on GPUs. On the CPU the collectives are a part of the
step (not "the step's own arithmetic"), and the time outside torch is read from a window there too."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from gpudash.core.running import Running
from gpudash.diagnosis.checks import ONE_RANK, Check
from gpudash.diagnosis.evidence import Evidence
from gpudash.diagnosis.judge import Findings, judged
from gpudash.diagnosis.parts import Parts
from gpudash.diagnosis.remedies import remedies
from gpudash.diagnosis.rules import diagnose
from gpudash.diagnosis.verdict import OUTSIDE_TORCH, Bound
from gpudash.engine.comm_split import RankComm
from gpudash.engine.trace_evidence import with_comm
from gpudash.engine.trace_read import read_bounded
from gpudash.job.diagnosis_window import JobDiagnosis, VerdictContext, verdict_event
from gpudash.job.step_record import StepRecord
from gpudash.ranks.own_work import RankWork, judge
from gpudash.stats.comparison import Comparison, Verdict
from tests.helpers import measured_evidence, script_verdict, verdict_of

SETTINGS = {
    "num_workers": "0",
    "pin_memory": "False",
    "site": "/t/train.py:15",
    "ddp_bucket_cap_mb": "25",
    "ddp_gradient_as_bucket_view": "False",
}


def _cpu(**fields: object) -> Evidence:
    """Rank 0 of a gloo DDP job on the CPU: a step of 26.8 ms whose longest collective, from its
    arrival, took 23.5 ms (what ``diagnose`` measured of ``--slow 2`` on three ranks)."""
    base = Evidence(steps=30, step_ms=26.8, input_ms=0.5, comm_longest_ms=23.5, job_settings=SETTINGS, cpus=2)
    return replace(base, **fields)  # type: ignore[arg-type]


def test_the_lead_ranks_wait_for_the_straggler_is_its_collectives_less_the_straggler_s_own() -> None:
    works = [RankWork(0, 3.4, 0.2, 23.4, 30), RankWork(1, 3.5, 0.2, 23.2, 30), RankWork(2, 23.7, 0.3, 3.1, 30)]
    verdict = judge(works)
    assert verdict is not None and verdict.rank == 2
    assert verdict.wait_of(0) == pytest.approx(20.3) and verdict.wait_of(1) == pytest.approx(20.1)
    assert verdict.wait_of(2) == 0.0  # the straggler waits for no one
    assert verdict.wait_of(5) is None  # a rank it has no figures of
    even = judge([RankWork(0, 3.4, 0.3, 3.0, 30), RankWork(1, 3.45, 0.3, 3.0, 30)])
    assert even is not None and even.rank is None and even.wait_of(0) is None  # no rank named: no wait said


def test_on_the_cpu_a_rank_waiting_for_a_straggler_is_waiting_not_the_steps_own_arithmetic() -> None:
    e = _cpu(straggler_rank=2, straggler_wait_ms=20.3)
    verdict = diagnose(e)
    assert verdict.bound == Bound.WAIT, verdict.line()
    assert verdict.why == "its collectives wait for rank 2 76% of each step (20.3 of 26.8 ms)"
    found = {r.limit: r.up_to for r in remedies(e, verdict.bound, script=True)}
    assert found["waiting"] == pytest.approx(26.8 / (26.8 - 20.3))
    # before: no GPU figures, so the step's own arithmetic, all 26.8 ms of it
    assert diagnose(replace(e, straggler_rank=None, straggler_wait_ms=None, comm_longest_ms=None)).bound == Bound.CPU


def test_the_one_rank_check_caps_the_wait_for_another_rank_but_not_for_rank_0() -> None:
    """A waiting remedy is capped by the one-rank check unless the rank waited for is rank 0 (which
    keeps its extra work alone): the straggler the untraced own work names is the one weighed."""
    one_rank = Check(ONE_RANK, "1 rank", Comparison(2.0, 1.8, 2.2, Verdict.FASTER), 10.0, 20.0, world=3)
    late_2 = _cpu(straggler_rank=2, straggler_wait_ms=20.3)
    (wait,) = [r for r in remedies(late_2, Bound.WAIT, True, [one_rank]) if r.limit == "waiting"]
    assert wait.up_to == pytest.approx(2.2)
    late_0 = replace(late_2, straggler_rank=0)  # a rank 1 waiting for rank 0 (its evidence, were it the lead)
    (wait,) = [r for r in remedies(late_0, Bound.WAIT, True, [one_rank]) if r.limit == "waiting"]
    assert wait.up_to == pytest.approx(26.8 / (26.8 - 20.3))


def test_on_the_cpu_even_ranks_whose_collectives_take_most_of_the_step_are_communication_bound() -> None:
    """Three ranks on two CPUs: 4.46 ms of a 6.76 ms step in gloo's collectives, no straggler."""
    e = Evidence(steps=635, step_ms=6.76, input_ms=0.32, comm_longest_ms=4.46, job_settings=SETTINGS)
    verdict = diagnose(e)
    assert verdict.bound == Bound.COMM, verdict.line()
    assert verdict.why == "its collectives take 66% of each step (4.5 of 6.8 ms, from this rank's arrival to their end)"
    (comm,) = [r for r in remedies(e, verdict.bound, script=True) if r.limit.startswith("communication")]
    assert comm.up_to == pytest.approx(6.76 / (6.76 - 4.46))
    assert "bucket_cap_mb=100 (now 25)" in comm.advice
    small = replace(e, comm_longest_ms=1.0)  # a sliver of the step: its own work is the verdict's
    assert diagnose(small).bound == Bound.CPU


def test_the_straggler_itself_is_judged_by_its_own_step_its_collectives_apart() -> None:
    """Rank 0 sleeping 20 ms a step on the CPU, the others waiting for it: 23.5 ms outside torch in
    its window, of which 3.3 ms is its own collectives (a gloo wait is no operator)."""
    late = {"straggler_rank": 0, "straggler_wait_ms": 0.0}
    e = _cpu(step_ms=25.1, input_ms=0.4, comm_longest_ms=3.3, host_gaps_ms=23.5, **late)
    verdict = diagnose(e)
    assert verdict.bound == Bound.CPU and verdict.case == OUTSIDE_TORCH, verdict.line()
    assert verdict.why.startswith("19.8 of its 21.4 ms a step is outside torch")


def test_on_gpus_the_untraced_wait_outweighs_a_distorted_windows() -> None:
    """A window that pulled the ranks apart: its steps 1.48× slower, its NCCL kernels spinning 18.8
    ms a step. With no straggler named, its wait (within the untraced longest collective, 19.5 ms)
    is waiting; with the ranks' own work naming rank 1, rank 0 waiting 0.4 ms for it untraced, the
    spin is the window's: the GPU's work (60 ms busy less the spin and the transfer) fills the
    untraced step; with 24 ms untraced, waiting for rank 1 — whichever rank the window saw last."""
    base = Evidence(30, 42.0, 0.0, syncs_per_step=0.0, launch_delay_us=15.0, gpu_busy_pct=97.0, gpu_ms_per_step=60.0)
    base = replace(base, host_ms_per_step=15.0, traced_step_ms=62.0, comm_longest_ms=19.5)
    window = with_comm(base, RankComm(0.46, 0.3, 20.0, 18.8, {}, 0, 28))
    assert diagnose(window).bound == Bound.WAIT and "wait for rank 0" in diagnose(window).why
    barely = replace(window, straggler_rank=1, straggler_wait_ms=0.4)
    verdict = diagnose(barely)
    assert verdict.bound == Bound.GPU_COMPUTE and verdict.why.startswith("kernels ran 98% of the time ("), verdict.why
    assert Parts.of(barely).gpu == pytest.approx(60.0 - 0.3 - 18.8)  # the whole spin out, not the 0.4 ms
    late_1 = diagnose(replace(window, comm_longest_ms=25.0, straggler_rank=1, straggler_wait_ms=24.0))
    assert late_1.bound == Bound.WAIT and late_1.why.startswith("its collectives wait for rank 1 57% of each step")
    assert "nothing else on the GPU" not in late_1.why  # untraced: not a window's kernels


def test_a_gpu_job_without_its_window_has_no_collectives_part_from_nccls_overlapping_times() -> None:
    """NCCL's collectives overlap the backward pass: their time from arrival is no exposed part of
    a GPU job's step where no window measured one (its syncs are counted: CUDA)."""
    gpu_job = Evidence(steps=30, step_ms=40.0, input_ms=0.0, syncs_per_step=0.0, comm_longest_ms=12.0)
    assert not gpu_job.on_cpu and Parts.of(gpu_job).comm is None
    assert "collectives" not in diagnose(gpu_job).why
    assert Parts.of(replace(gpu_job, syncs_per_step=None)).comm == pytest.approx(12.0)  # gloo's, on the CPU


def test_the_verdict_event_carries_the_untraced_wait_and_reads_back() -> None:
    known = VerdictContext(straggler="straggler: rank 2 — …", straggler_rank=2, straggler_wait_ms=20.3)
    event = judged(verdict_event(30.0, _cpu(), None, known, Running("job:train.py", "", 0)), None)
    assert verdict_of(event).head.bound == Bound.WAIT
    evidence = verdict_of(event).evidence
    assert evidence.straggler_rank == 2 and evidence.straggler_wait_ms == pytest.approx(20.3)
    assert evidence.waited_rank == 2
    named_only = verdict_event(30.0, _cpu(), None, VerdictContext(straggler_rank=2), Running("job:t.py", "", 0))
    assert isinstance(named_only.data, Findings)
    assert named_only.data.evidence.straggler_rank is None  # no wait measured: nothing said of it


def test_a_jobs_diagnosis_takes_its_profiler_window_on_the_cpu_too() -> None:
    d = JobDiagnosis(steps=3, asked_at=0.0)
    phases = [d.add(StepRecord(k, 0.01 * k, 10.0, 8, 0, 0.0, None, False, 0.01), now=100.0) for k in range(1, 6)]
    assert phases == ["timed", None, None, None, "traced"]  # the warm-up out of time, then 3 timed steps


def _trace(path: Path, device: bool) -> None:
    """Two steps of 10 ms, each with 2 ms of operators and 8 ms of nothing of torch's (a sleep);
    ``device``: a kernel beside them (a GPU's window)."""
    events: list[dict[str, object]] = []
    for step in range(2):
        t0 = 10_000.0 * step
        events.append({"ph": "X", "cat": "user_annotation", "name": "gpudash.step", "ts": t0, "dur": 10_000.0})
        events.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": t0 + 100.0, "dur": 2_000.0})
        if device:
            events.append({"ph": "X", "cat": "kernel", "name": "gemm", "ts": t0 + 200.0, "dur": 1_000.0})
    path.write_text(json.dumps({"traceEvents": events}))


def test_a_cpu_windows_host_operators_are_read_and_a_gpu_windows_are_left(tmp_path: Path) -> None:
    from gpudash.engine.trace_figures import figures

    _trace(cpu := tmp_path / "cpu.json", device=False)
    kept = read_bounded(cpu)
    assert {e["cat"] for e in kept.events} == {"user_annotation", "cpu_op"} and kept.steps == 2
    assert figures(kept.events, 2, 20.0).host_gaps_ms_per_step == pytest.approx(7.9)
    _trace(gpu := tmp_path / "gpu.json", device=True)
    assert "cpu_op" not in {e["cat"] for e in read_bounded(gpu).events}  # its launches tell the host's time


def test_a_job_that_accumulates_under_no_sync_is_not_told_to_start() -> None:
    e = Evidence(steps=30, step_ms=9.2, input_ms=0.0, comm_longest_ms=4.0, job_settings=SETTINGS)
    (comm,) = [r for r in remedies(e, diagnose(e).bound, script=True) if r.limit.startswith("communication")]
    assert "accumulate gradients over K steps under no_sync()" in comm.advice
    accumulating = replace(e, job_settings={**SETTINGS, "ddp_no_sync": "True"})
    (comm,) = [r for r in remedies(accumulating, Bound.COMM, script=True) if r.limit.startswith("communication")]
    assert "accumulate gradients over K steps" not in comm.advice
    assert comm.advice.endswith("a larger batch per rank, or more micro-batches accumulated under no_sync() a step")


def test_an_even_jobs_distorted_window_is_weighed_against_its_untraced_step() -> None:
    """2 H200s, an even DDP ResNet-50 (session 22, call J): its window ran its steps 1.68× slower,
    the GPU busy 55% of them — but its kernels' 29.5 ms a step are 93% of the 31.8 ms untraced step.
    It read "host/launch-bound: the CPU needs 31.6 ms … the GPU idles 45%"; its one-rank check found
    no change, and the same job's other diagnosis read GPU-bound (compute)."""
    e = measured_evidence("h200x2-even-distorted-window.json")
    verdict = diagnose(e)
    assert verdict.bound == Bound.GPU_COMPUTE, verdict.line()
    assert verdict.why.startswith("kernels ran 93% of the time (55% in a window whose steps ran 1.68× slower)")
    assert remedies(e, verdict.bound, script=True) == []  # the host's untraced time is not known to be longer
    synced = diagnose(replace(e, syncs_per_step=1.0))  # one sync a step: the GPU busy, not idle 45%
    assert synced.bound == Bound.GPU_COMPUTE, synced.line()
    same = replace(e, traced_step_ms=32.5, gpu_busy_pct=92.0, gpu_ms_per_step=29.9)  # a window not slowed ...
    assert diagnose(same).why.startswith("kernels ran 92% of the time, SMs busy")  # ... is read as it ran
    noisy = replace(same, step_ms=33.4)  # an untraced step 3% longer (noise) changes nothing
    assert diagnose(noisy).why.startswith("kernels ran 92% of the time, SMs busy")


def test_the_cpus_verdict_says_arithmetic_only_where_a_window_told_it_from_the_time_outside_torch() -> None:
    unseen = diagnose(Evidence(steps=30, step_ms=24.5, input_ms=0.1))  # a job that ended before its window
    assert unseen.why.startswith("the step's own work on the CPU, 24.5 ms a step"), unseen.why
    some = diagnose(Evidence(steps=30, step_ms=24.5, input_ms=0.1, host_gaps_ms=10.2))  # 41% of it: said beside
    assert some.bound == Bound.CPU and some.case == "", some.line()
    assert some.why == (
        "the step's own arithmetic on the CPU, 24.5 ms a step (0% of it waiting for input); "
        "10.1 ms of it is outside torch, in stretches of 1 ms or more"
    )
    accumulating = diagnose(Evidence(steps=30, step_ms=9.2, input_ms=0.0, comm_longest_ms=1.6, host_gaps_ms=0.3))
    assert accumulating.why.endswith("(0% of it waiting for input, 1.6 ms in its collectives)"), accumulating.why


def test_a_gpu_job_without_its_window_is_told_what_was_measured_not_to_move_to_a_gpu() -> None:
    """A GPU job that ended before its diagnosis window (its syncs counted: CUDA): not "CPU-bound —
    move the model to a GPU", but its untraced figures and that only a window tells the rest."""
    ended = Evidence(steps=400, step_ms=40.0, input_ms=1.0, syncs_per_step=0.0)
    verdict = script_verdict(ended)
    assert verdict.bound == Bound.UNTOLD, verdict.line()
    assert verdict.why == (
        "40 ms a step (2% of it waiting for input, 0 syncs a step); whether the GPU or the host bounds it, "
        "only a profiler window tells"
    )
    assert verdict.advice.startswith("diagnose it with more steps")
    late = replace(ended, comm_longest_ms=30.0, straggler_rank=1, straggler_wait_ms=25.0)  # its ranks' own work
    assert script_verdict(late).bound == Bound.WAIT  # ... tells the wait without a window
    assert diagnose(replace(ended, syncs_per_step=None)).bound == Bound.CPU  # no sync counted: the CPU
