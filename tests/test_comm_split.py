"""A window's collectives told apart into transfer and wait, matched across ranks
(``gpudash.engine.comm_split``), on a recorded pair of traces and on windows made to order: the
transfer is what the data's movement takes, the rest of an early rank's collective is its wait for
the last rank, and a verdict weighs the transfer as communication and the wait as waiting."""

from __future__ import annotations

import gzip
import json
from dataclasses import replace
from pathlib import Path

import pytest

from gpudash.diagnosis.evidence import Evidence
from gpudash.diagnosis.remedies import remedies
from gpudash.diagnosis.rules import diagnose
from gpudash.diagnosis.verdict import Bound
from gpudash.engine.collectives import Collective
from gpudash.engine.comm_split import RankComm, split
from gpudash.engine.trace_evidence import with_comm
from gpudash.engine.trace_figures import figures
from gpudash.job.traces import TraceRead
from gpudash.job.window_reads import GATHER_S, WindowReads, matched
from tests.helpers import measured_evidence

TRACES = Path(__file__).parent / "data" / "traces"
# The pair: 4 steps of a DDP ResNet-50 (bf16, 128 images a rank, 25 MB buckets) on 2 H200s whose
# rank 0 sleeps 25 ms before each batch, CUDA kernels only (docs/bench/h200x2-issue74/comm_probe.py);
# the same bytes all-reduced apart after a barrier took 0.573 ms on rank 0 and 0.507 ms on rank 1.
ALL_REDUCE_APART_MS = 0.573
STEPS = 4


def _figures(rank: int) -> object:
    with gzip.open(TRACES / f"ddp2-rank0-late-rank{rank}.json.gz", "rt") as f:
        return figures(json.load(f)["traceEvents"], STEPS, 1000.0)


def test_a_recorded_pair_splits_into_the_all_reduces_own_time_and_rank_1s_wait_for_rank_0() -> None:
    figs = {rank: _figures(rank) for rank in (0, 1)}
    comm = split({rank: f.collectives for rank, f in figs.items()}, STEPS)  # type: ignore[attr-defined]
    assert comm[0].matched == comm[1].matched == 7 * STEPS  # every collective of the steps, on both ranks
    for rank in (0, 1):
        # the transfer is the data's movement: within 2× of the all-reduce timed apart
        assert ALL_REDUCE_APART_MS / 2 <= comm[rank].transfer_ms <= 2 * ALL_REDUCE_APART_MS, comm[rank]
        assert comm[rank].last_rank == 0  # rank 0 arrives last: the one the others wait for
    assert comm[0].wait_ms < 0.1  # the late rank waits for no one
    assert comm[1].wait_ms > 20.0  # rank 1 waits about its 25 ms for rank 0 in every step
    # its collectives' kernels ran exposed ~ as long as it waited; the transfer is a sliver of that
    exposed = figs[1].comm_exposed_ms_per_step  # type: ignore[attr-defined]
    assert exposed > 10 * comm[1].transfer_exposed_ms and comm[1].wait_exposed_ms > 0.9 * (exposed - 1.0)


def _evidence(**fields: object) -> Evidence:
    """A DDP step of 42 ms whose GPU is busy 32 ms of it, its host's own work 10 ms."""
    base = Evidence(steps=30, step_ms=42.0, input_ms=0.0, syncs_per_step=0.0, launch_delay_us=15.0)
    busy = {"gpu_busy_pct": 95.0, "gpu_ms_per_step": 32.0, "host_ms_per_step": 10.0, "traced_step_ms": 42.0}
    return replace(base, **{**busy, **fields})  # type: ignore[arg-type]


def test_waiting_for_a_late_rank_is_not_communication_and_its_gain_is_not_the_transfers() -> None:
    """The issue's case: 19.1 ms of a 41.9 ms step in exposed NCCL kernels, of which the data's
    movement is 0.46 ms: not communication-bound, and no "up to 1.8×" for communication."""
    unmatched = _evidence(comm_exposed_ms=19.1, comm_exposed_kinds={"all-reduce": 19.100})
    assert diagnose(unmatched).bound == Bound.COMM  # one rank's window: all its exposed time is counted
    matched = RankComm(0.46, 0.3, 20.0, 18.8, {"all-reduce": 0.3}, last_rank=1, matched=28)
    waiting = with_comm(unmatched, matched)  # the window's collectives matched across the ranks
    verdict = diagnose(waiting)
    assert verdict.bound == Bound.WAIT and "wait for rank 1" in verdict.why and "0.46 ms" in verdict.why
    found = {r.limit: r.up_to for r in remedies(waiting, verdict.bound, script=True)}
    assert not any(limit.startswith("communication") for limit in found)  # 0.3 ms: not worth naming
    assert found["waiting"] == pytest.approx(42.0 / (42.0 - 18.8))


def test_exposed_transfer_the_largest_part_is_communication_bound_and_named_by_its_kinds() -> None:
    kinds = {"all-gather": 14.7, "reduce-scatter": 7.1}
    fsdp = with_comm(
        _evidence(gpu_ms_per_step=30.0, comm_exposed_ms=22.0), RankComm(22.0, 21.8, 0.2, 0.2, kinds, busbw_gbps=310.0)
    )
    verdict = diagnose(fsdp)
    assert verdict.bound == Bound.COMM
    assert "all-gather 14.7, reduce-scatter 7.1" in verdict.why and "310 GB/s" in verdict.why
    labels = [r.limit for r in remedies(fsdp, verdict.bound, script=True)]
    assert "communication: all-gather, reduce-scatter" in labels and not any("all-reduce" in x for x in labels)


def _ranks(durations: list[float], gap: float = 30_000.0) -> dict[int, list[Collective]]:
    """One all-reduce on each rank: rank r's kernel runs ``durations[r]`` µs and all end at ``gap``."""
    made = {r: Collective("all-reduce", 7, gap - d, gap, 100 << 20, ((gap - d, gap),)) for r, d in enumerate(durations)}
    return {r: [c] for r, c in made.items()}


@pytest.mark.parametrize("ranks", [2, 3, 4])
@pytest.mark.parametrize("where", ["first", "middle", "last"])
def test_the_rank_the_others_wait_for_is_named_first_middle_or_last_of_2_to_4(ranks: int, where: str) -> None:
    late = {"first": 0, "middle": ranks // 2, "last": ranks - 1}[where]
    durations = [500.0 if r == late else 20_000.0 + 100 * r for r in range(ranks)]  # µs
    comm = split(_ranks(durations), 1)
    assert {c.last_rank for c in comm.values()} == {late}
    assert comm[late].wait_ms == 0.0 and all(comm[r].wait_ms > 19.0 for r in range(ranks) if r != late)
    assert all(c.transfer_ms == pytest.approx(0.5) for c in comm.values())
    factor = 2 * (ranks - 1) / ranks  # an all-reduce's bus bandwidth (nccl-tests)
    assert comm[0].busbw_gbps == pytest.approx((100 << 20) * factor / (500.0 * 1e3))


def test_ranks_that_take_turns_arriving_last_name_no_one() -> None:
    turns = [Collective("all-reduce", 7, 0.0, 10_000.0), Collective("all-reduce", 7, 20_000.0, 21_000.0)]
    other = [Collective("all-reduce", 9, 9_000.0, 10_000.0), Collective("all-reduce", 9, 11_000.0, 21_000.0)]
    comm = split({0: turns, 1: other}, 1)
    assert comm[0].last_rank is None and comm[0].wait_ms == comm[1].wait_ms == pytest.approx(9.0)


def test_a_window_waits_for_every_ranks_trace_then_for_no_more_than_its_limit() -> None:
    now = [0.0]
    reads = WindowReads(clock=lambda: now[0])
    asked = {"window": "job-3", "ranks": 3}
    assert reads.add(TraceRead("trace", "a", rank=1, **asked)) == []  # type: ignore[arg-type]
    assert reads.add(TraceRead("trace", "b", rank=0, **asked)) == []  # type: ignore[arg-type]
    (window,) = reads.add(TraceRead("trace", "c", rank=2, **asked))  # type: ignore[arg-type]
    assert sorted(r.rank for r in window) == [0, 1, 2]
    reads.add(TraceRead("trace", "d", rank=0, window="job-4", ranks=2))
    assert reads.due() == []
    now[0] = GATHER_S
    (late,) = reads.due()
    assert [r.rank for r in late] == [0] and matched(late) == {}  # one rank's trace: nothing to match


def test_a_wait_read_in_a_distorting_window_counts_no_more_than_the_untraced_steps_waited() -> None:
    """An even job on 2 H200s: its ranks, slowed unevenly by the profiler (51.9 ms a traced step
    against 32.4 untraced), waited 6.9 ms a traced step for each other; untraced, a step's longest
    collective took 0.53 ms from the rank's arrival. Not "waiting for another rank" and no remedy
    for it; its GPU's work, the window's spin left out, is most of the untraced step: GPU-bound, as
    the same job read on another pair with its one-rank run 1.01× [0.99–1.03] (docs/bench/h200x4-issue74c)."""
    even = measured_evidence("ddp2-even-h200.json")
    assert even.comm_wait_ms is not None and even.comm_longest_ms is not None
    assert even.comm_wait_ms > 10 * even.comm_longest_ms  # the window's wait, and the untraced steps'
    verdict = diagnose(even)
    assert verdict.bound not in (Bound.WAIT, Bound.COMM), verdict.line()
    assert not [r for r in remedies(even, verdict.bound, script=True) if r.limit == "waiting"]


def test_a_late_ranks_wait_is_worth_what_the_untraced_steps_waited_for_it() -> None:
    """Rank 1 sleeping 25 ms before each batch, diagnosed on rank 0: the wait's remedy is the step
    over the step without the untraced steps' wait (22 ms of 54: the job runs 32 ms a step without
    it), and communication — 0.47 ms of transfer — gets none."""
    late = measured_evidence("ddp2-rank1-late-h200.json")
    assert late.comm_last_rank == 1 and late.comm_longest_ms is not None
    found = {r.limit: r.up_to for r in remedies(late, diagnose(late).bound, script=True)}
    assert found["waiting"] == pytest.approx(late.step_ms / (late.step_ms - late.comm_longest_ms), rel=1e-3)
    assert not any(limit.startswith("communication") for limit in found)


def test_the_bus_bandwidth_comes_from_the_jobs_calls_where_the_kernels_do_not_say_their_bytes() -> None:
    """A kernels-only window's NCCL kernels carry no sizes: the bytes the job's hooks saw it all-reduce
    over the window (ResNet-50's 25,557,032 fp32 gradients a step, in 5 calls a step) over the matched
    kernels' transfer — and no figure where the calls and the kernels do not tally."""
    figs = {rank: _figures(rank) for rank in (0, 1)}
    collectives = {rank: fig.collectives for rank, fig in figs.items()}  # type: ignore[attr-defined]
    assert split(collectives, STEPS)[0].busbw_gbps is None
    window_bytes = STEPS * 25_557_032 * 4
    comm = split(collectives, STEPS, {"all-reduce": (5 * STEPS, window_bytes)})
    transfer_us = 2095.334  # the 20 matched all-reduces' shortest kernels, summed
    assert comm[0].busbw_gbps == pytest.approx(window_bytes / (transfer_us * 1e3), rel=1e-4)  # 2 ranks: factor 1
    assert comm[1].busbw_gbps == comm[0].busbw_gbps
    assert split(collectives, STEPS, {"all-reduce": (5 * STEPS - 1, window_bytes)})[0].busbw_gbps is None
