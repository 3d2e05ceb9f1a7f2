"""Issue 89 on 2 GPUs (NCCL): ``diagnose`` of a torchrun job whose rank 0 or rank 1 reads a slower
input names that rank in its head, with its own work against the other's, and an even job names
none — as the gloo tests of ``tests/test_torchrun_ranks.py`` check on the CPU."""

from __future__ import annotations

import json

import pytest

from tests.test_job import gpudash
from tests.test_torchrun_ranks import torchrun

pytestmark = [pytest.mark.multigpu, pytest.mark.slow]


def _diagnose(*job_args: str) -> dict[str, object]:
    job = torchrun(2, "--steps", "100000", *job_args)
    done = gpudash("diagnose", "--json", "--warmup", "1", "--no-check", "--", *job, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    document: dict[str, object] = json.loads(done.stdout[done.stdout.index("{") :])
    return document


@pytest.mark.parametrize("slow", [0, 1])
def test_diagnose_on_two_gpus_names_the_rank_whose_input_is_slower_in_its_head(slow: int) -> None:
    verdict = _diagnose("--slow-rank", str(slow), "--item-ms", "2")
    waiting = verdict.get("waiting_for")
    assert isinstance(waiting, dict), verdict
    assert waiting["rank"] == verdict["evidence_rank"] == slow and verdict["ranks"] == 2, verdict
    assert waiting["own_ms"] > waiting["others_own_ms"] > 0, waiting


def test_diagnose_of_an_even_two_gpu_job_names_no_rank() -> None:
    verdict = _diagnose("--slow-rank", "-1", "--item-ms", "0")
    assert "waiting_for" not in verdict and verdict["ranks"] == 2, verdict
