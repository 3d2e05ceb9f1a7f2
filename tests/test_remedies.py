"""What each fix is worth: a diagnosis' remedies, each with how much faster the step could be with
its limit gone ("up to N×", an upper bound from the window's measured parts) and the limit that
comes next, ordered by worth, never advising what the job already does."""

from __future__ import annotations

import pytest

from gpudash.diagnosis.remedies import HOST, INPUT, SYNCS, Parts, answer, remedies
from gpudash.diagnosis.rules import Bound, Evidence, diagnose


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
    e = Evidence(steps=30, step_ms=10.0, input_ms=9.5, syncs_per_step=0.0, job_settings="num_workers=0,pin_memory=True")
    (fix,) = remedies(e, Bound.INPUT, script=True)
    assert fix.limit == INPUT and fix.up_to == pytest.approx(20.0)
    assert "more DataLoader workers (num_workers, now 0)" in fix.advice and "pin_memory" not in fix.advice
    settings = "num_workers=4,pin_memory=False"
    unpinned = Evidence(steps=30, step_ms=10.0, input_ms=9.5, syncs_per_step=0.0, job_settings=settings)
    advice = remedies(unpinned, Bound.INPUT, script=True)[0].advice
    assert "now 4" in advice and "pin_memory=True" in advice and "persistent_workers=True" in advice
    on_cpu = Evidence(steps=30, step_ms=10.0, input_ms=9.5, job_settings="num_workers=0,pin_memory=False")
    assert "pin_memory" not in remedies(on_cpu, Bound.INPUT, script=True)[0].advice  # nothing to pin for


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
