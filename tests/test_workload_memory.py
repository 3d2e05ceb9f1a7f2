"""gpudash's own step loop counts a workload's memory by kind as a job's hooks count a job's: the
optimizer's parameters, gradients and state, and the activations saved for backward in one step
apart (its third, then every 500th) — for a user's model file, equal to a count by hand."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest

MLP = """import torch
from torch import nn

from gpudash.api import Training


def workload(batch_size: int, device: torch.device) -> Training:
    model = nn.Sequential(nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 1))

    def batch(gen: torch.Generator):
        return torch.randn(batch_size, 512, generator=gen), torch.randn(batch_size, 1, generator=gen)

    return Training(model=model, loss_fn=nn.MSELoss(), optimizer=torch.optim.Adam(model.parameters()), batch=batch)
"""
MIB = 2**20


@pytest.mark.slow
def test_a_user_models_activations_and_optimizer_are_counted_on_its_rows(tmp_path: Path) -> None:
    """Saved for backward: the first layer's input (64 × 512), the ReLU's output (64 × 1024, the
    second layer's input too), the loss's output and target (64 × 1 each), in float32; the weights
    and their gradients are the optimizer's (526,337 parameters; Adam's two moments and step)."""
    (tmp_path / "mlp.py").write_text(MLP)
    out = tmp_path / "r.csv"
    args = ["record", str(out), "-q", "-w", f"{tmp_path / 'mlp.py'}:workload", "--device", "cpu", "-b", "64"]
    done = subprocess.run(
        [sys.executable, "-m", "gpudash", *args, "--steps", "400"], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    with open(out, newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["row_kind"] == "sample" and r["mem_activations_mib"]]
    assert rows, "no row carries the activations"
    params = (512 * 1024 + 1024 + 1024 + 1) * 4
    for row in rows:
        assert float(row["mem_activations_mib"]) == pytest.approx(64 * (512 + 1024 + 1 + 1) * 4 / MIB, rel=1e-4)
        assert float(row["mem_params_mib"]) == pytest.approx(params / MIB, rel=1e-4)
        assert float(row["mem_optimizer_mib"]) == pytest.approx((2 * params + 4 * 4) / MIB, rel=1e-5)  # 4 step counters


def test_what_a_count_of_saved_tensors_leaves_out_is_the_parameters_not_their_gradients() -> None:
    """Gradients are freed by each step's ``zero_grad(set_to_none=True)``: an activation the
    allocator puts where one was must still count (a ReLU's output of this file's MLP went
    uncounted now and then, its row reading 0.125 MiB for 0.375)."""
    import torch

    from gpudash.boot.gpudash_boot.tensor_bytes import storages

    model = torch.nn.Linear(8, 8)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model(torch.randn(4, 8)).sum().backward()
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    grads = {p.grad.untyped_storage().data_ptr() for p in model.parameters() if p.grad is not None}
    assert storages(optimizer) == params and len(grads) == 2 and not grads & storages(optimizer)
