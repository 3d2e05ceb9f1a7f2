"""A data-parallel step whose gradient all-reduce runs with nothing beside it is communication-bound
(issue 55): the profiler window's collectives (NCCL kernels) and their exposed part per step, and
the verdict that names it before "GPU-bound", whose busy time counts those kernels too."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gpudash.diagnosis.advice import in_script_words
from gpudash.diagnosis.evidence import Evidence
from gpudash.diagnosis.rules import COMM_SHARE, diagnose
from gpudash.diagnosis.verdict import Bound
from gpudash.engine.trace_figures import STEP_MARKER, figures


def _step(t0: float, *, compute_us: float, comm_from_us: float, comm_us: float) -> list[dict[str, Any]]:
    """One step of a DDP rank: its marker, a compute kernel, and an all-reduce that starts inside it."""
    return [
        {"cat": "user_annotation", "name": STEP_MARKER, "ts": t0, "dur": 500.0},
        {"cat": "kernel", "name": "sm90_xmma_gemm_bf16", "ts": t0, "dur": compute_us, "args": {"stream": 7}},
        {
            "cat": "kernel",
            "name": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL",
            "ts": t0 + comm_from_us,
            "dur": comm_us,
            "args": {"stream": 13},
        },
    ]


def test_the_all_reduces_exposed_part_is_what_no_other_kernel_hides() -> None:
    events = _step(0.0, compute_us=6000, comm_from_us=4000, comm_us=6000)
    events += _step(10_000.0, compute_us=6000, comm_from_us=4000, comm_us=6000)
    fig = figures(events, 2, 20.0)
    assert fig.comm_ms_per_step == pytest.approx(6.0)
    assert fig.comm_exposed_ms_per_step == pytest.approx(4.0)  # 2 of its 6 ms ran beside the GEMM
    assert fig.numbers()["comm_exposed_ms_per_step"] == pytest.approx(4.0)


def test_a_rank_without_collectives_has_no_communication_figures() -> None:
    fig = figures(_step(0.0, compute_us=6000, comm_from_us=0, comm_us=0)[:2], 1, 10.0)
    assert fig.comm_ms_per_step is None and fig.comm_exposed_ms_per_step is None


def test_an_exposed_all_reduce_over_a_quarter_of_the_step_and_its_largest_part_is_communication_bound() -> None:
    """Issue 63: communication-bound needs the exposed collectives to be the step's largest part too;
    4 ms exposed beside 5.9 ms of computation (99% busy) is GPU-bound."""
    busy = Evidence(steps=30, step_ms=10.0, input_ms=0.1, syncs_per_step=0.0, gpu_busy_pct=99.0, gpu_ms_per_step=9.9)
    exposed = Evidence(**{**busy.__dict__, "comm_exposed_ms": 6.0})
    verdict = diagnose(exposed)
    assert verdict.bound == Bound.COMM
    assert "60% of each step (6.0 of 10.0 ms)" in verdict.line() and "ddp_no_sync=K" in verdict.advice
    assert "bucket_cap_mb=100" in in_script_words(verdict).advice  # a job's own DistributedDataParallel
    assert diagnose(Evidence(**{**busy.__dict__, "comm_exposed_ms": 4.0})).bound == Bound.GPU_COMPUTE
    hidden = Evidence(**{**busy.__dict__, "comm_exposed_ms": 10.0 * COMM_SHARE - 0.1})
    assert diagnose(hidden).bound == Bound.GPU_COMPUTE
    assert Evidence.from_dict(json.loads(json.dumps(exposed.as_dict()))).comm_exposed_ms == pytest.approx(6.0)


def test_exposed_collectives_that_are_the_steps_largest_part_outweigh_its_syncs() -> None:
    """Issue 63, 2 H200s: an FSDP2 job whose all-gathers and reduce-scatters ran exposed 10.0 of its
    15.6 ms, its GPU idle 10%, with 2 syncs a step (its batches copied from pageable memory), was
    called sync-bound; the collectives are its largest part. Without them, its syncs are the verdict."""
    synced = Evidence(steps=30, step_ms=15.6, input_ms=0.1, syncs_per_step=2.0, gpu_busy_pct=90.0, gpu_ms_per_step=14)
    fsdp = Evidence(
        **{**synced.__dict__, "comm_exposed_ms": 10.0, "comm_exposed_kinds": {"all-gather": 7.7, "reduce-scatter": 2.3}}
    )
    verdict = diagnose(fsdp)
    assert verdict.bound == Bound.COMM and "all-gather 7.7, reduce-scatter 2.3" in verdict.line(), verdict.line()
    assert diagnose(synced).bound == Bound.SYNC
