"""diagnose and tune tell one story about a job's input (issue 62). On an in-memory TensorDataset
with no workers, the input is a tensor index and a collation, cheaper than a worker's hand-over:
diagnose advises making less of each batch, not workers, and tune's race finds no worker count
faster. (On a Dataset whose ``__getitem__`` waits on reads both name workers: the race on
``slow_reads.py`` in ``tests/test_tune_job.py``, and its diagnosis in ``tests/test_job_diagnose.py``.)"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from gpudash.diagnosis.advice import HANDOVER_MS, input_advice
from gpudash.diagnosis.evidence import Evidence
from tests.test_job import JOBS, gpudash

IN_MEMORY = [sys.executable, str(JOBS / "in_memory.py"), "--steps", "100000000"]


@pytest.mark.slow
def test_on_an_in_memory_loader_diagnose_advises_no_workers_and_tune_finds_none_faster(tmp_path: Path) -> None:
    diagnosed = gpudash("diagnose", "--json", "--warmup", "1", "--", *IN_MEMORY)
    assert diagnosed.returncode == 0, diagnosed.stderr[-2000:]
    verdict = json.loads(diagnosed.stdout)
    evidence = verdict["evidence"]  # the input's parts, measured in the job
    assert evidence["input_dataset_ms"] < HANDOVER_MS and evidence["input_collate_ms"] > 0
    advice = input_advice(Evidence(**{k: v for k, v in evidence.items() if k != "sync_sites"}))
    assert advice.startswith("make less of each batch: a larger batch") and "num_workers" not in advice
    for remedy in verdict["remedies"]:  # the input's remedy, where it is worth naming, is that one
        assert remedy["limit"] != "input" or remedy["advice"] == advice
    raced = gpudash("tune", "--json", "--seconds", "5", "--out", str(tmp_path / "t"), "--", *IN_MEMORY)
    assert raced.returncode == 0, raced.stderr[-2000:]
    answer = json.loads(raced.stdout)
    assert answer["winner"]["settings"] == {}, answer["winner"]  # the job as written: no worker count was faster
    assert any(c["settings"].get("num_workers") for c in answer["candidates"])  # workers were raced, and lost
