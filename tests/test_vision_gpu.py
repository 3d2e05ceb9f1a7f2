"""The torchvision families on a real GPU: they record at their default batch with no host sync,
fine-tuning pipelined on two streams trains what serial trains, and the memory check measures
real networks well enough to refuse what cannot fit and to accept what can."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import torch

from tests.helpers import ROOT
from tests.test_record import gpudash
from workloads.base import WorkloadOptions
from workloads.catalog_types import WorkloadError
from workloads.factory import build

pytestmark = pytest.mark.gpu

MINE = f"{ROOT / 'examples' / 'mine.py'}:workload"


@pytest.mark.parametrize("name", ["resnet50", "vit_b_16", "finetune"])
def test_a_vision_family_records_at_its_default_batch_without_a_sync(tmp_path: Path, name: str) -> None:
    r = gpudash("record", "out.csv", "-w", name, *"--device cuda --steps 40 -q".split(), cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr
    with open(tmp_path / "out.csv", newline="") as f:
        samples = [row for row in csv.DictReader(f) if row["row_kind"] == "sample"]
    assert samples and all(row["workload"] == name for row in samples)
    counted = [float(row["syncs_per_step"]) for row in samples if row["syncs_per_step"]]
    assert counted and all(s == 0.0 for s in counted)
    losses = [float(row["loss"]) for row in samples if row["loss"]]
    assert losses and all(0.0 < loss < 20.0 for loss in losses)  # cross-entropy over 1000 classes starts near 6.9


def _finetuned(variant: str, steps: int = 6) -> list[torch.Tensor]:
    with build("finetune", "cuda", WorkloadOptions(variant=variant, batch_size=16, seed=2)) as w:
        for _ in range(steps):
            w.step()
        w.drain()
        return [p.detach().clone() for p in w.trained_parameters()]


def test_finetune_pipelined_on_two_streams_trains_what_serial_trains() -> None:
    torch.backends.cudnn.deterministic = True
    try:
        serial, pipelined = _finetuned("serial"), _finetuned("pipelined")
    finally:
        torch.backends.cudnn.deterministic = False
    assert all(torch.equal(a, b) for a, b in zip(serial, pipelined, strict=True))


def test_resnet50_refuses_a_batch_the_gpu_cannot_hold_and_takes_one_it_can() -> None:
    with build("resnet50", "cuda", WorkloadOptions(batch_size=16)) as w:
        with pytest.raises(WorkloadError, match=r"^batch 4096 needs about .* of GPU memory .* free on cuda:\d"):
            w.check_change(batch_size=4096)
        assert w.check_change(batch_size=128)[1] == 128


def test_a_small_network_is_not_refused_a_large_batch_for_a_workspace() -> None:
    """examples/mine.py at batch 2048 needs well under a GiB; a cuDNN workspace taken at 4 samples
    and not at 1 once made the estimate 132 GiB."""
    with build(MINE, "cuda", WorkloadOptions(batch_size=32)) as w:
        assert w.check_change(batch_size=2048)[1] == 2048
        step = w.step_memory()
        assert step.at(2048) < 8 * 2**30, step.how()
