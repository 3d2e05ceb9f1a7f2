"""What each fix is worth: a diagnosis' remedies, each with how much faster the step could be with
its limit gone ("up to N×", an upper bound from the window's measured parts) and the limit that
comes next, ordered by worth, never advising what the job already does."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpudash.diagnosis.advice import input_advice
from gpudash.diagnosis.checks import loader_settings
from gpudash.diagnosis.evidence import Evidence
from gpudash.diagnosis.parts import HOST, INPUT, SYNCS, Parts
from gpudash.diagnosis.remedies import answer, remedies
from gpudash.diagnosis.rules import diagnose
from gpudash.diagnosis.verdict import Bound
from gpudash.job.diagnosis_window import untraced_evidence
from gpudash.job.step_record import StepRecord


def sync_script() -> Evidence:
    """Issue 56's CNN loop with a NaN guard and two .item() a step: 2.1 ms a step, the GPU busy
    0.5 ms of it; under the profiler the step took 3.2 ms, 0.2 of them waiting in syncs."""
    return Evidence(
        steps=30,
        step_ms=2.1,
        input_ms=0.0,
        syncs_per_step=3.0,
        gpu_busy_pct=16.0,
        gpu_ms_per_step=0.5,
        host_ms_per_step=3.1,
        host_wait_ms=0.2,
        traced_step_ms=3.2,
    )


def test_removing_the_syncs_of_a_launch_bound_step_is_worth_little_and_the_next_limit_is_named() -> None:
    e = sync_script()
    assert diagnose(e).bound == Bound.SYNC
    (sync,) = remedies(e, Bound.SYNC, script=True)  # CUDA graphs need a step free of syncs: next, not now
    assert sync.limit == SYNCS
    assert sync.up_to == pytest.approx(2.1 / ((3.1 - 0.2) * 2.1 / 3.2), rel=1e-6)  # the host's own time, untraced
    assert 1.0 < sync.up_to <= 1.5  # the figure the issue holds it to: at most 1.5×
    assert sync.then.startswith("host/launch-bound at 1.9 ms a step: CUDA graphs or torch.compile")
    assert "up to 3.8× more" in sync.then  # the GPU is busy 0.5 ms of each 1.9 ms step


def test_an_input_bound_jobs_remedy_leaves_out_what_its_loader_already_does() -> None:
    e = Evidence(
        steps=30,
        step_ms=10.0,
        input_ms=9.5,
        syncs_per_step=0.0,
        job_settings={"num_workers": "0", "pin_memory": "True"},
    )
    (fix,) = remedies(e, Bound.INPUT, script=True)
    assert fix.limit == INPUT and fix.up_to == pytest.approx(20.0)
    assert "more DataLoader workers (num_workers, now 0)" in fix.advice and "pin_memory" not in fix.advice
    settings = {"num_workers": "4", "pin_memory": "False"}
    unpinned = Evidence(steps=30, step_ms=10.0, input_ms=9.5, syncs_per_step=0.0, job_settings=settings)
    advice = remedies(unpinned, Bound.INPUT, script=True)[0].advice
    assert "now 4" in advice and "pin_memory=True" in advice and "persistent_workers=True" in advice
    on_cpu = Evidence(steps=30, step_ms=10.0, input_ms=9.5, job_settings={"num_workers": "0", "pin_memory": "False"})
    assert "pin_memory" not in remedies(on_cpu, Bound.INPUT, script=True)[0].advice  # nothing to pin for


def test_an_input_bound_job_whose_workers_have_every_cpu_is_not_told_to_add_workers() -> None:
    """Two workers and the training loop on a machine of two CPUs: more workers would only share them
    (a user's threaded job: tune's 4 and 8 workers were slower than its 2)."""
    settings = {"num_workers": "2", "pin_memory": "False"}
    two = Evidence(steps=30, step_ms=10.0, input_ms=6.0, job_settings=settings, cpus=2)
    advice = remedies(two, Bound.INPUT, script=True)[0].advice
    assert "cheaper samples, not more DataLoader workers (2 and the loop have its 2 CPUs)" in advice
    many = Evidence(steps=30, step_ms=10.0, input_ms=6.0, job_settings=settings, cpus=16)
    assert "more DataLoader workers (num_workers, now 2)" in remedies(many, Bound.INPUT, script=True)[0].advice


def test_workers_that_wait_on_reads_are_told_to_be_more_past_the_cpus_and_the_check_races_twice_as_many() -> None:
    """A user's Dataset that waits on reads (a sleep), 2 workers each busy 8% of a CPU on a machine of
    two: diagnose said "cheaper samples, not more DataLoader workers" and raced persistent workers
    alone; tune found 16 workers 5.24× faster (a robustness sweep, 2026-11-29)."""
    settings = {"num_workers": "2", "pin_memory": "False", "persistent_workers": "False"}
    waiting = Evidence(
        steps=30, step_ms=35.5, input_ms=33.3, job_settings=settings, cpus=2, input_workers=2, input_workers_busy=0.08
    )
    (fix,) = remedies(waiting, Bound.INPUT, script=True)
    assert "more DataLoader workers (num_workers, now 2, each busy 8% of a CPU: they wait on reads)" in fix.advice
    assert loader_settings(fix.advice, waiting, cpus=2)[0] == ("num_workers", "4")
    busy = replace(waiting, input_workers_busy=0.9)  # they compute: the CPUs are the limit
    (fix,) = remedies(busy, Bound.INPUT, script=True)
    assert "not more DataLoader workers" in fix.advice
    assert ("num_workers", "4") not in loader_settings(fix.advice, busy, cpus=2)


def test_remedies_are_ordered_by_worth_and_each_is_an_upper_bound_of_its_parts() -> None:
    e = Evidence(steps=30, step_ms=10.0, input_ms=4.0, gpu_ms_per_step=1.5, host_ms_per_step=6.0, traced_step_ms=10.0)
    found = remedies(e, diagnose(e).bound, script=False)
    assert [r.limit for r in found] == [HOST, INPUT]  # 10/(4+1.5) = 1.8× before 10/6 = 1.7×
    assert [r.up_to for r in found] == sorted((r.up_to for r in found), reverse=True)
    parts = Parts.of(e)
    for r in found:  # never more than the step over what is left of it once that part is gone
        after = parts.without(r.limit)
        assert after is not None and r.up_to == pytest.approx(parts.step / after.step)
    assert found[0].advice.startswith("cuda_graph")  # a family's remedies name gpudash's knobs


def test_a_step_with_nothing_to_gain_gets_no_remedy_and_the_json_carries_them() -> None:
    tight = Evidence(steps=30, step_ms=10.0, input_ms=0.1, gpu_ms_per_step=9.9, host_ms_per_step=9.8, gpu_busy_pct=99.0)
    assert remedies(tight, diagnose(tight).bound, script=True) == []
    doc, lines = answer(sync_script(), diagnose(sync_script()), script=True)
    found = doc["remedies"]
    assert isinstance(found, list) and len(found) == 1
    assert set(found[0]) == {"limit", "advice", "up_to", "then"} and found[0]["limit"] == SYNCS
    assert lines[0].startswith("  up to 1.1× (syncs): ")


def test_workers_are_advised_for_the_part_they_shorten_and_only_where_it_outweighs_their_hand_over() -> None:
    """Issue 62: a loader without workers tells the Dataset's part of the wait from collation's. Reads
    that take most of it, and longer than a worker's hand-over: workers. A tensor index and a
    collation cheaper than that hand-over: make less of each batch (workers would make it slower)."""
    settings = {"num_workers": "0", "pin_memory": "False"}
    reads = Evidence(
        steps=30, step_ms=21.4, input_ms=20.6, input_dataset_ms=20.1, input_collate_ms=0.3, job_settings=settings
    )
    (fix,) = remedies(reads, Bound.INPUT, script=True)
    assert (
        fix.advice
        == "the Dataset's __getitem__ is 20 ms of the 21 ms a step waits: more DataLoader workers (num_workers, now 0)"
    )
    in_memory = Evidence(
        steps=30, step_ms=0.5, input_ms=0.2, input_dataset_ms=0.12, input_collate_ms=0.05, job_settings=settings
    )
    advice = input_advice(in_memory)
    assert advice.startswith("make less of each batch: a larger batch, fewer Python objects per sample")
    assert "num_workers" not in advice and "the Dataset takes 0.12, collating 0.05, the rest 0.03" in advice
    assert "the data kept as one tensor and sliced" in advice  # on the CPU; on a GPU: kept there and indexed
    assert "kept on the GPU" in input_advice(replace(in_memory, syncs_per_step=0.0))
    collating = replace(in_memory, input_ms=9.0, input_dataset_ms=2.0, input_collate_ms=6.5)  # most of it collation
    assert input_advice(collating).startswith("make less of each batch")
    unknown = replace(reads, input_dataset_ms=None, input_collate_ms=None)  # workers made the batches: not seen here
    assert input_advice(unknown).startswith("make the input pipeline faster: more DataLoader workers")


def test_a_step_record_carries_the_input_parts_and_the_window_sums_them() -> None:
    raw = [[k, 0.01 * k, 10.0, 16, 0, 0.004, 0, 0, None if k == 1 else 0.01, 0.003, 0.0005] for k in range(1, 12)]
    records = [r for r in (StepRecord.parse(x) for x in raw) if r is not None]
    assert len(records) == 11 and records[1].dataset_s == 0.003 and records[1].collate_s == 0.0005
    old = StepRecord.parse(raw[1][:9])  # older hooks: no parts, none made up
    assert old is not None and old.dataset_s == 0.0 and old.collate_s == 0.0
    e = untraced_evidence(records)
    assert e.input_ms == pytest.approx(4.0) and e.input_dataset_ms == pytest.approx(3.0)
    assert e.input_collate_ms == pytest.approx(0.5)
    assert untraced_evidence([replace(r, dataset_s=0.0, collate_s=0.0) for r in records]).input_dataset_ms is None
