"""A compiled GPT training script, as people run it (``tests/data/jobs/gpt_train.py``), on a GPU
(issues 89 and 90): ``diagnose`` judges its training steps — an ``estimate_loss()`` of 40 ``.item()``
calls every 25 steps and its ``torch.save`` are not the step's syncs — and ``record`` gives its
MFU, the compiled model's FLOPs counted on fake tensors against the script's own analytic count."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import pytest

from tests.test_job import JOBS, gpudash, job_line

pytestmark = pytest.mark.gpu

GPT = str(JOBS / "gpt_train.py")
SHAPE = ("--layers", "4", "--embd", "256", "--heads", "4", "--block", "256", "--batch", "8")
EVALUATING = ("--eval-interval", "25", "--eval-iters", "40", "--log-interval", "10")


def test_diagnose_of_a_compiled_gpt_script_counts_its_training_steps_syncs_not_its_evaluations() -> None:
    job = (sys.executable, GPT, "--compile", "--steps", "100000", *SHAPE, *EVALUATING)
    done = gpudash("diagnose", "--json", "--no-check", "--warmup", "5", "--", *job, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    document = json.loads(done.stdout[done.stdout.index("{") :])
    evidence = document["evidence"]
    syncs = evidence["syncs_per_step"]
    assert syncs is not None and syncs <= 0.1 + 0.2, (syncs, document)  # one .item() every 10 steps, its logging
    sites = json.dumps(evidence.get("sync_sites") or {})
    assert "estimate_loss" not in sites and "torch.save" not in sites, sites
    assert document["bound"] != "sync", document
    assert document["over"].startswith(f"over {evidence['steps']} training steps"), document


def test_record_of_a_compiled_gpt_script_gives_its_mfu_from_the_uncompiled_models_count(tmp_path: Path) -> None:
    out = tmp_path / "gpt.csv"
    job = (sys.executable, GPT, "--compile", "--steps", "300", *SHAPE, *EVALUATING)
    done = gpudash("record", str(out), "-q", "--", *job, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    with open(out, newline="") as f:
        rows = list(csv.DictReader(f))
    (flops,) = [r for r in rows if r["event_what"] == "flops"]
    said = flops["event_message"]
    assert "counted as the uncompiled model's forward and backward on fake tensors" in said and "bf16" in said, said
    own = job_line(done.stdout)
    counted = [float(r["flops_per_step"]) for r in rows if r["row_kind"] == "sample" and r["flops_per_step"]]
    assert counted and abs(counted[-1] / float(own["flops_per_step"]) - 1) < 0.10, (counted[-1], own)
    assert any(float(r["mfu_pct"] or 0) > 0 for r in rows if r["row_kind"] == "sample"), said


@pytest.mark.multigpu
@pytest.mark.slow  # a compiled script on 2 ranks: 57 s on 2 H200s (docs/bench/h200x2-issue87m)
def test_diagnose_of_the_script_over_two_ranks_counts_the_training_steps_syncs_alone() -> None:
    torchrun = (sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2")
    job = (*torchrun, GPT, "--compile", "--steps", "100000", *SHAPE, *EVALUATING)
    done = gpudash("diagnose", "--json", "--no-check", "--warmup", "5", "--", *job, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    document = json.loads(done.stdout[done.stdout.index("{") :])
    evidence = document["evidence"]
    assert document["ranks"] == 2 and evidence["syncs_per_step"] <= 0.1 + 0.2, document
    assert "estimate_loss" not in json.dumps(evidence.get("sync_sites") or {}), document
