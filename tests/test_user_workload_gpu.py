"""Your own model on a real GPU: the frozen stage pipelined on two CUDA streams trains what serial
trains, and the example records with its syncs counted (none: its step never waits for the GPU)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import torch

from tests.helpers import ROOT
from tests.test_record import gpudash
from workloads.base import WorkloadOptions
from workloads.factory import build

pytestmark = pytest.mark.gpu

MINE = f"{ROOT / 'examples' / 'mine.py'}:workload"
FROZEN = f"{ROOT / 'examples' / 'frozen_trunk.py'}:workload"


def _trained(variant: str, steps: int = 20) -> list[torch.Tensor]:
    w = build(FROZEN, "cuda", WorkloadOptions(variant=variant, batch_size=32, seed=1))
    for _ in range(steps):
        w.step()
    w.drain()
    params = [p.detach().clone() for p in w.model.parameters()]
    w.close()
    return params


def test_the_frozen_stage_pipelined_on_two_streams_trains_what_serial_trains() -> None:
    serial, pipelined = _trained("serial"), _trained("pipelined")
    assert all(torch.equal(a, b) for a, b in zip(serial, pipelined, strict=True))


def test_the_example_records_on_the_gpu_without_a_sync(tmp_path: Path) -> None:
    r = gpudash(
        "record", "out.csv", "-w", MINE, *"--device cuda -b 64 --steps 300 -q".split(), cwd=tmp_path, timeout=240
    )
    assert r.returncode == 0, r.stderr
    with open(tmp_path / "out.csv", newline="") as f:
        samples = [row for row in csv.DictReader(f) if row["row_kind"] == "sample"]
    counted = [float(row["syncs_per_step"]) for row in samples if row["syncs_per_step"]]
    assert counted and all(s == 0.0 for s in counted)
    assert samples[-1]["gpu_util_pct"] != ""  # NVML beside it
