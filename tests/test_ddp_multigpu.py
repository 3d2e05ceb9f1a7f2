"""Data-parallel runs on 2 NVIDIA GPUs with NCCL: the same checks as tests/test_ddp.py on the CPU
(DDP trains what one process trains on the global batch, every rank agrees, a change reaches every
rank at the same step), the real launcher through --record, and a killed rank."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from gpudash.core.proctree import alive
from tests.helpers import checkout_first_on_path
from tests.test_ddp import Loaders, ddp_run, single_run_on_the_global_batch
from tests.test_ddp_launch import kill_a_rank

pytestmark = [pytest.mark.multigpu, pytest.mark.slow]


@pytest.mark.parametrize(
    ("family", "variant", "rel"),
    [
        ("encdec", "serial", 1e-5),  # cuDNN sums in another order for a batch of 4 than for two of 2
        ("sync_loss", "fixed", 1e-4),
    ],
)
def test_two_gpus_train_what_one_gpu_trains_on_the_global_batch(family: str, variant: str, rel: float) -> None:
    got = ddp_run(family, variant, device="cuda")
    (p0, changed0, batch0), (p1, changed1, batch1) = got[0], got[1]
    assert torch.equal(p0, p1)
    assert changed0 == changed1 == [2] and batch0 == batch1
    single = single_run_on_the_global_batch(family, variant, device="cuda")
    assert (p0 - single).norm() / single.norm() < rel


@pytest.mark.parametrize(("family", "variant"), [("input_pipeline", "gpu-transform"), ("augment", "cpu")])
def test_loader_workers_of_two_gpu_ranks_survive_a_batch_change(family: str, variant: str) -> None:
    """Spawned workers of an NCCL rank aborted when a batch change shut them down (the 2-H200
    input-pipeline sweep); started from a forkserver they exit cleanly and the ranks go on."""
    loaders: Loaders = {}
    got = ddp_run(family, variant, device="cuda", loaders=loaders)
    (p0, changed0, batch0), (p1, changed1, batch1) = got[0], got[1]
    assert torch.equal(p0, p1)
    assert changed0 == changed1 == [2] and batch0 == batch1
    for exit_codes, started_by in loaders.values():
        assert exit_codes and not any(exit_codes) and started_by == ["multiprocessing.popen_forkserver"]


def test_record_on_two_gpus_reports_both_ranks(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": checkout_first_on_path()}
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpudash",
            "--record",
            "run.csv",
            "-w",
            "encdec",
            "--device",
            "cuda",
            "--nproc",
            "2",
            "-b",
            "8",
            "--duration",
            "8",
            "-q",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    rows = list(csv.DictReader((tmp_path / "run.csv").open()))
    samples = [r for r in rows if r["row_kind"] == "sample"]
    assert samples and all(int(r["samples"]) == 16 * int(r["steps"]) for r in samples)
    assert any(r.get("world_size") == "2" and r.get("slowest_rank") in ("0", "1") for r in samples)
    assert all(r["syncs_per_step"] in ("", "0", "0.0") or float(r["syncs_per_step"]) == 0 for r in samples)


def test_killing_one_gpu_rank_ends_the_run_with_exit_1_and_no_process_left(tmp_path: Path) -> None:
    code, err, everyone = kill_a_rank(["-w", "encdec", "--device", "cuda"], tmp_path)
    assert code == 1 and "rank 1 killed by SIGKILL" in err, err
    time.sleep(1.0)
    assert not [p for p in everyone if alive(p)]


def test_a_two_gpu_diagnosis_measures_the_exposed_all_reduce(tmp_path: Path) -> None:
    """Issue 55: rank 0's profiled window on two NCCL ranks gives the all-reduce's exposed part."""
    import json

    env = {**os.environ, "PYTHONPATH": checkout_first_on_path()}
    argv = [sys.executable, "-m", "gpudash", "diagnose", "-w", "resnet50", "-b", "64", "--nproc", "2", "--json", "-q"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    evidence = json.loads(done.stdout)["evidence"]
    exposed = evidence.get("comm_exposed_ms")
    assert exposed is not None and 0 <= exposed < evidence["step_ms"], evidence
