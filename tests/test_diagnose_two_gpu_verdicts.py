"""Issue 74: the verdicts ``diagnose`` gives three DDP jobs on 2 H200s, from the evidence their
windows measured (docs/bench/h200x4-issue74c, call 3: ``benchmarks/jobs/ddp_resnet_job.py
--bucket-view``, DDP ResNet-50 bf16, torch 2.11). That call's gpudash called all three
host/launch-bound: the even job, whose window waited 10.1 ms a step for the other rank where its
untraced steps waited 0.55 ms; rank 1 late by 25 ms, which rank 0 waited for 24 ms of its 56 ms
step, its own work 31 ms; rank 0 late, whose host slept. The one-rank run beside each: 1.01×
[0.99–1.03] (even), 1.76× [1.64–1.89] (rank 1 late). And an FSDP2 job whose two syncs a step were
its batch's copy to the GPU (``x.to(device)`` from memory not pinned), told to keep ``.item()``
out of its step."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from gpudash.boot.gpudash_boot.sync_table import Site, SiteCount, SyncTable
from gpudash.diagnosis.advice import for_the_job
from gpudash.diagnosis.evidence import Evidence
from gpudash.diagnosis.rules import diagnose
from gpudash.diagnosis.verdict import OUTSIDE_TORCH, Bound
from tests.helpers import measured_evidence

EVEN = measured_evidence("h200x4-even.json")  # call 3's diagnose --json, each
RANK_1_LATE = measured_evidence("h200x4-rank1-late.json")
RANK_0_LATE = measured_evidence("h200x4-rank0-late.json")


def test_an_even_job_is_gpu_bound_its_windows_wait_weighed_as_its_untraced_steps_wait() -> None:
    verdict = diagnose(EVEN)
    assert verdict.bound == Bound.GPU_COMPUTE, verdict.line()  # the one-rank run: 1.01×, no change detected
    assert "kernels wait 13.4 ms in the GPU's queue" in verdict.why  # the host runs ahead: not host-bound


def test_a_rank_waiting_for_a_late_rank_1_is_told_to_wait_for_it_whatever_its_own_work() -> None:
    verdict = diagnose(RANK_1_LATE)
    assert verdict.bound == Bound.WAIT, verdict.line()
    assert verdict.why.startswith("its collectives wait for rank 1 with nothing else on the GPU 43% of each step")
    assert "the data itself moves in 0.44 ms" in verdict.why and "50% of NVLink's 478 GB/s" in verdict.why


def test_a_late_rank_0_that_sleeps_is_told_its_sleep_and_not_cuda_graphs() -> None:
    verdict = for_the_job(diagnose(RANK_0_LATE), RANK_0_LATE)
    assert verdict.bound == Bound.HOST and verdict.case == OUTSIDE_TORCH, verdict.line()
    assert verdict.why.startswith("the host spends 31.9 of its 55.9 ms a step outside torch")
    assert verdict.advice.startswith("take the step's own work outside torch off it")


MAIN = Site(file="/job/train.py", line=145, function="<module>", text="main()")  # who called the job's main


def _syncs_at(*sites: tuple[str, int]) -> SyncTable:
    """A sync table of 100 steps whose syncs come from these lines (text, count) of the job's main."""
    rows = tuple(
        SiteCount(Site(file="/job/train.py", line=70 + i, function="main", text=text, called_from=MAIN), count)
        for i, (text, count) in enumerate(sites)
    )
    return SyncTable(steps=100, total=sum(count for _, count in sites), rows=rows)


def _fsdp2(**fields: Any) -> Evidence:
    """Call 3's FSDP2 job (``ddp_ranks.py --fsdp --dim 4096 --batch 64``): two syncs a step at its
    batch's copy, ``x, y = x.to(device), y.to(device)``, here at train.py:70; or ``fields``."""
    fsdp2 = measured_evidence("h200x4-fsdp2.json")
    return replace(fsdp2, **{"sync_sites": _syncs_at(("x, y = x.to(device), y.to(device)", 200)), **fields})


def test_syncs_at_a_copy_to_the_gpu_are_fixed_by_a_pinned_non_blocking_copy_not_by_keeping_item_out() -> None:
    e = _fsdp2()
    verdict = for_the_job(diagnose(e), e)
    assert verdict.bound == Bound.SYNC and "at train.py:70 x, y = x.to(device), y.to(device)" in verdict.why
    assert verdict.advice.startswith(
        "copy the batch to the GPU without waiting for it — pin_memory=True in its DataLoader (or .pin_memory()) "
        "and .to(device, non_blocking=True) at train.py:70"
    )
    pinned = _fsdp2(job_settings={"num_workers": "2", "pin_memory": "True", "site": "/job/train.py:73"})
    assert "pin_memory" not in for_the_job(diagnose(pinned), pinned).advice  # the loader pins already
    reads = _fsdp2(sync_sites=_syncs_at(("print(loss.item())", 150), ("x = x.to(device)", 50)))
    assert for_the_job(diagnose(reads), reads).advice.startswith("keep the step free of .item()")  # mostly reads
    back = _fsdp2(sync_sites=_syncs_at(("logits = out.to('cpu')", 200)))
    assert for_the_job(diagnose(back), back).advice.startswith("keep the step free of .item()")  # to the CPU
    for line in ("n = torch.nonzero(mask).to(device)", "x = x.to(torch.float16)", "y = out.to(device).cpu()"):
        other = _fsdp2(sync_sites=_syncs_at((line, 200)))  # the sync is not the copy's
        assert for_the_job(diagnose(other), other).advice.startswith("keep the step free of .item()"), line
    library = Site(file="/venv/lib/hf/utils.py", line=9, function="to", text="return data.to(**kwargs)", package="hf")
    caller = Site(file="/job/train.py", line=88, function="main", text="batch = move(batch)")
    moved = _fsdp2(sync_sites=SyncTable(100, 200, (SiteCount(replace(library, called_from=caller), 200),)))
    assert "at train.py:88 " in for_the_job(diagnose(moved), moved).advice  # a library's line: the job's that called it
    asked = _fsdp2(sync_sites=_syncs_at(("x = x.to(device, non_blocking=True)", 200)))
    advice = for_the_job(diagnose(asked), asked).advice  # non-blocking already: pinning is what is left
    assert "pin_memory=True" in advice and ".to(device, non_blocking=True)" not in advice
