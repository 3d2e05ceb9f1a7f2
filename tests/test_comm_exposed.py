"""Issue 63, "communication as it is": the exposed collectives are the traced steps' share of their
span, in ms of the job's (untraced) step, so never more than the step; split by collective kind; the
verdict says communication-bound only where they are the step's largest part, and advises only
what the job's DistributedDataParallel (or FSDP2) does not already do."""

from __future__ import annotations

import json
import random
from dataclasses import replace
from typing import Any

import pytest

from gpudash.diagnosis.evidence import Evidence, comm_kinds
from gpudash.diagnosis.remedies import answer
from gpudash.diagnosis.rules import diagnose
from gpudash.diagnosis.verdict import Bound
from gpudash.engine.collectives import collective_kind
from gpudash.engine.trace_evidence import with_trace
from gpudash.engine.trace_figures import STEP_MARKER, figures
from tests.helpers import script_verdict

ALL_REDUCE = "ncclDevKernel_AllReduce_Sum_f32_RING_LL"
ALL_GATHER = "ncclKernel_AllGather_RING_LL_Sum_int8_t"
REDUCE_SCATTER = "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL"
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32"
DDP_ON = {
    "ddp_bucket_cap_mb": "25.0",
    "ddp_gradient_as_bucket_view": "True",
    "ddp_static_graph": "False",
    "ddp_find_unused_parameters": "False",
}


def _kernel(name: str, start_ms: float, dur_ms: float, stream: int) -> dict[str, Any]:
    return {"cat": "kernel", "name": name, "ts": start_ms * 1000, "dur": dur_ms * 1000, "args": {"stream": stream}}


def _marker(start_ms: float, dur_ms: float) -> dict[str, Any]:
    return {"cat": "user_annotation", "name": STEP_MARKER, "ts": start_ms * 1000, "dur": dur_ms * 1000}


def issue_63_trace(steps: int = 2) -> list[dict[str, Any]]:
    """Steps of 68.6 ms under the profiler (twice the job's 34.3): 11.8 ms of computation, then an
    all-reduce alone on the GPU for 56.8 ms — the 56.8 ms the old verdict set against 34.3."""
    events: list[dict[str, Any]] = []
    for i in range(steps):
        t0 = 68.6 * i
        events += [_marker(t0, 5.0), _kernel(GEMM, t0, 11.8, 7), _kernel(ALL_REDUCE, t0 + 11.8, 56.8, 13)]
    return events


def ddp_job_evidence(step_ms: float = 34.3, settings: dict[str, str] | None = None) -> Evidence:
    """A job's untraced window: no input wait, no syncs."""
    return Evidence(steps=20, step_ms=step_ms, input_ms=0.2, syncs_per_step=0.0, job_settings=settings)


def test_the_exposed_collectives_never_exceed_the_jobs_step_when_traced_steps_are_twice_as_slow() -> None:
    fig = figures(issue_63_trace(), 2, 137.2)
    assert fig.comm_exposed_ms_per_step == pytest.approx(56.8)  # of a traced step, 68.6 ms
    assert fig.comm_exposed_share == pytest.approx(56.8 / 68.6)
    evidence = with_trace(ddp_job_evidence(), fig)
    assert evidence.comm_exposed_ms == pytest.approx(34.3 * 56.8 / 68.6)  # 28.4 ms, not 56.8
    verdict = diagnose(evidence)
    assert verdict.bound == Bound.COMM
    assert "collectives run with nothing else on the GPU 83% of each step (28.4 of 34.3 ms: all-reduce 28.4)" in (
        verdict.line()
    )
    assert "166%" not in verdict.line()


def test_a_span_holding_more_steps_than_counted_still_gives_a_share_of_one_step_at_most() -> None:
    """Four steps' events read as one step: ms per step come out 4 times too long, the share does not."""
    fig = figures(issue_63_trace(steps=4), 1, 274.4)
    assert fig.comm_exposed_ms_per_step == pytest.approx(4 * 56.8)
    evidence = with_trace(ddp_job_evidence(), fig)
    assert evidence.comm_exposed_ms is not None and evidence.comm_exposed_ms <= evidence.step_ms
    assert "83% of each step (28.4 of 34.3 ms" in diagnose(evidence).line()


def test_random_traces_never_give_more_exposed_time_than_the_step() -> None:
    rng = random.Random(63)
    names = [GEMM, ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, "ncclDevKernel_SendRecv", "ncclDevKernel_Broadcast_RING_LL"]
    for _ in range(200):
        events = [_marker(0.0, rng.uniform(0.1, 5.0))]
        events += [
            _kernel(rng.choice(names), rng.uniform(-5, 50), rng.uniform(0.01, 30), rng.randint(1, 4))
            for _ in range(rng.randint(1, 12))
        ]
        fig = figures(events, rng.randint(1, 3), 50.0)
        evidence = with_trace(ddp_job_evidence(step_ms=rng.uniform(1.0, 40.0)), fig)
        if evidence.comm_exposed_ms is None:
            continue
        assert 0.0 <= evidence.comm_exposed_ms <= evidence.step_ms + 1e-9
        assert sum(comm_kinds(evidence).values()) == pytest.approx(evidence.comm_exposed_ms, abs=0.01)
        verdict = diagnose(evidence)
        if verdict.bound == Bound.COMM:
            assert int(verdict.why.split("on the GPU ")[1].split("%")[0]) <= 100


def test_nccl_kernel_names_are_classified_by_collective() -> None:
    assert collective_kind(ALL_REDUCE) == "all-reduce"
    assert collective_kind(ALL_GATHER) == "all-gather"
    assert collective_kind(REDUCE_SCATTER) == "reduce-scatter"
    assert collective_kind("ncclDevKernel_Broadcast_RING_LL") == "broadcast"
    assert collective_kind("ncclDevKernel_SendRecv") == "send/recv"
    assert collective_kind("ncclDevKernel_Reduce_Sum_f32_RING_LL") == "other"


def test_each_kind_gets_its_own_exposed_time_beside_overlapping_computation() -> None:
    """A 4 ms GEMM; an all-reduce 2–8 ms (4 ms after the GEMM ends); a reduce-scatter under the GEMM
    (none exposed); an all-gather 8–12 ms alone; then an all-gather and a reduce-scatter on two
    streams at once, 12–14 ms: that moment is split between them."""
    events = [
        _marker(0.0, 1.0),
        _kernel(GEMM, 0.0, 4.0, 7),
        _kernel(ALL_REDUCE, 2.0, 6.0, 13),
        _kernel(REDUCE_SCATTER, 1.0, 2.0, 14),
        _kernel(ALL_GATHER, 8.0, 4.0, 13),
        _kernel(ALL_GATHER, 12.0, 2.0, 13),
        _kernel(REDUCE_SCATTER, 12.0, 2.0, 14),
    ]
    fig = figures(events, 1, 20.0)
    assert fig.comm_ms_per_step == pytest.approx(13.0)  # 1–14 ms
    assert fig.comm_exposed_ms_per_step == pytest.approx(4.0 + 4.0 + 2.0)
    assert fig.comm_exposed_kind_ms_per_step == pytest.approx(
        {"all-reduce": 4.0, "all-gather": 5.0, "reduce-scatter": 1.0}
    )
    assert fig.comm_kind_ms_per_step == pytest.approx({"all-reduce": 6.0, "all-gather": 6.0, "reduce-scatter": 4.0})
    details = {k: f"{v:.4g}" for k, v in fig.numbers().items()}
    assert details["comm_exposed_pct"] == "71.43"  # 10 of the span's 14 ms
    assert details["comm_all_gather_exposed_ms_per_step"] == "5" and details["comm_all_gather_ms_per_step"] == "6"
    assert details["comm_all_reduce_exposed_ms_per_step"] == "4"
    assert details["comm_reduce_scatter_exposed_ms_per_step"] == "1"
    verdict = diagnose(with_trace(ddp_job_evidence(step_ms=14.0), fig))
    assert verdict.bound == Bound.COMM
    assert "71% of each step (10.0 of 14.0 ms: all-gather 5.0, all-reduce 4.0, reduce-scatter 1.0)" in verdict.line()


def test_communication_bound_only_where_the_exposed_collectives_are_the_steps_largest_part() -> None:
    base = Evidence(steps=20, step_ms=10.0, input_ms=0.5, syncs_per_step=0.0, launch_delay_us=20.0, traced_step_ms=20.0)
    # 40% exposed, 30% computation, the host's own 2 of 20 traced ms: communication-bound
    comm = replace(base, input_ms=0.5, gpu_busy_pct=70.0, comm_exposed_ms=4.0, host_ms_per_step=2.0)
    assert diagnose(comm).bound == Bound.COMM
    # 30% exposed, 65% computation: GPU-bound, though a quarter of the step is over
    gpu = replace(base, input_ms=0.5, gpu_busy_pct=95.0, comm_exposed_ms=3.0, host_ms_per_step=2.0)
    assert diagnose(gpu).bound == Bound.GPU_COMPUTE
    # 30% exposed, the host's own work 12 of 20 traced ms (60%): the host's, not the collectives'
    host = replace(base, input_ms=0.5, gpu_busy_pct=45.0, comm_exposed_ms=3.0, host_ms_per_step=12.0)
    assert diagnose(host).bound == Bound.HOST
    # 26% exposed, 28% of the step waiting for input: not communication-bound
    fed = replace(base, input_ms=2.8, gpu_busy_pct=40.0, comm_exposed_ms=2.6, host_ms_per_step=1.0)
    assert diagnose(fed).bound != Bound.COMM


def test_a_host_that_runs_ahead_of_a_full_queue_does_not_count_as_a_part() -> None:
    """Launched work waits milliseconds in the GPU's queue: the host's long step marker is its wait
    for a slot, not work the GPU waits for."""
    queued = Evidence(
        steps=20,
        step_ms=10.0,
        input_ms=0.1,
        syncs_per_step=0.0,
        gpu_busy_pct=98.0,
        comm_exposed_ms=5.0,
        host_ms_per_step=19.0,
        traced_step_ms=20.0,
        launch_delay_us=8000.0,
    )
    assert diagnose(queued).bound == Bound.COMM


def test_gradient_as_bucket_view_is_advised_only_where_the_job_does_not_set_it() -> None:
    fig = figures(issue_63_trace(), 2, 137.2)
    on = script_verdict(with_trace(ddp_job_evidence(settings=DDP_ON), fig))
    assert on.bound == Bound.COMM
    assert "gradient_as_bucket_view=True" not in on.advice
    assert "bucket_cap_mb=100 (now 25)" in on.advice  # the default 25 MB buckets: larger ones are advised
    off = script_verdict(with_trace(ddp_job_evidence(settings={**DDP_ON, "ddp_gradient_as_bucket_view": "False"}), fig))
    assert "gradient_as_bucket_view=True" in off.advice
    evidence = with_trace(ddp_job_evidence(settings=DDP_ON), fig)
    _, lines = answer(evidence, on, script=True)
    assert any("(communication: all-reduce)" in line and "bucket_cap_mb=100" in line for line in lines)
    assert not any("gradient_as_bucket_view=True" in line for line in lines)
    # a model whose gradients fit one bucket of 25 MB (a sweep's DDP MLP of 139 KiB): larger buckets change nothing
    small = script_verdict(with_trace(ddp_job_evidence(settings={**DDP_ON, "ddp_grad_mb": "0.1357"}), fig))
    assert "bucket_cap_mb" not in small.advice
    large = script_verdict(with_trace(ddp_job_evidence(settings={**DDP_ON, "ddp_grad_mb": "97.49"}), fig))
    assert "bucket_cap_mb=100 (now 25)" in large.advice


def test_the_advice_follows_what_the_jobs_model_already_does() -> None:
    fig = figures(issue_63_trace(), 2, 137.2)

    def advice(settings: dict[str, str] | None) -> str:
        return script_verdict(with_trace(ddp_job_evidence(settings=settings), fig)).advice

    done = advice(
        {"ddp_bucket_cap_mb": "100.0", "ddp_gradient_as_bucket_view": "True", "ddp_find_unused_parameters": "False"}
    )
    assert "bucket_cap_mb" not in done and "gradient_as_bucket_view=True" not in done
    assert "a larger batch per rank" in done
    unused = advice(
        {"ddp_bucket_cap_mb": "100.0", "ddp_gradient_as_bucket_view": "True", "ddp_find_unused_parameters": "True"}
    )
    assert "find_unused_parameters=False" in unused
    fsdp = advice({"fsdp": "2", "num_workers": "4"})
    assert "reshard_after_forward" in fsdp and "prefetch" in fsdp and "bucket" not in fsdp
    # on 2 H200s an FSDP2 job was told DDP's advice: its "fsdp=2" was read, in the joined text the
    # hooks sent then, as a part of a site's path holding a comma; each setting is its own now
    site = {"num_workers": "4", "site": "/data/a,b/train.py:39"}
    assert advice({**site, "fsdp": "2"}) == fsdp
    assert advice({"num_workers": "4", "site": "", "fsdp": "2"}) == fsdp  # no site known: the hooks send it empty
    ddp = {"ddp_bucket_cap_mb": "100.0", "ddp_gradient_as_bucket_view": "True", "ddp_find_unused_parameters": "False"}
    assert advice({**site, **ddp}) == done
    generic = advice({"num_workers": "4", "pin_memory": "True"})  # no DDP keys: the model's settings unknown
    assert "DistributedDataParallel(bucket_cap_mb=100, gradient_as_bucket_view=True)" in generic
    assert "DistributedDataParallel(bucket_cap_mb=100, gradient_as_bucket_view=True)" in advice(None)


def test_the_kinds_come_back_from_a_recordings_details_and_a_hostile_one_is_ignored() -> None:
    evidence = with_trace(ddp_job_evidence(), figures(issue_63_trace(), 2, 137.2))
    again = Evidence.from_dict(json.loads(json.dumps(evidence.as_dict())))
    assert diagnose(again).line() == diagnose(evidence).line()
    hostile_file = {**again.as_dict(), "comm_exposed_kinds": {"all-reduce": "nan", "\x1b[31mx": 3, "all-gather": 1e999}}
    hostile = Evidence.from_dict(json.loads(json.dumps(hostile_file)))
    assert comm_kinds(hostile) == {}
    older = Evidence.from_dict({**again.as_dict(), "comm_exposed_kinds": "all-reduce=12.0"})  # an older file's text
    assert older.comm_exposed_kinds is None and comm_kinds(older) == {}
    assert "(28.4 of 34.3 ms)" in diagnose(hostile).line()


def test_a_ranks_exposed_collectives_are_in_ms_of_the_jobs_untraced_step() -> None:
    """The rank rows' exposed all-reduce: the traced steps' share of the job's own step (30 ms), not
    the slower traced step's ms; before a step time is known, the traced figure as it is."""
    from gpudash.engine.trace_figures import TraceFigures
    from gpudash.job.traces import TraceRead

    fig = TraceFigures(steps=20, wall_ms=1200.0, comm_exposed_share=0.5, comm_exposed_ms_per_step=30.0)
    read = TraceRead("trace", "x.json", figures=fig)
    assert read.exposed_ms(0.030) == pytest.approx(15.0)
    assert read.exposed_ms(None) == 30.0
    assert TraceRead("trace", "x.json", error="no trace").exposed_ms(0.030) is None
