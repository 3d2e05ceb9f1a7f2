"""Your own model on a real GPU: the frozen stage pipelined on two CUDA streams trains what serial
trains, and the example records with its syncs counted (none: its step never waits for the GPU)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import torch

from gpudash.core.protocol import Event, EventKind, SetKnob
from gpudash.engine.loop import StepLoop
from tests.helpers import ROOT, build_as
from tests.test_record import gpudash
from workloads.base import WorkloadOptions
from workloads.knobs import parse_knobs
from workloads.user import UserWorkload

pytestmark = pytest.mark.gpu

MINE = f"{ROOT / 'examples' / 'mine.py'}:workload"
FROZEN = f"{ROOT / 'examples' / 'frozen_trunk.py'}:workload"


def _trained(spec: str, options: WorkloadOptions, steps: int = 20) -> list[torch.Tensor]:
    """The trained parameters after ``steps`` steps of ``spec`` on the GPU."""
    with build_as(UserWorkload, spec, "cuda", options) as w:
        for _ in range(steps):
            w.step()
        w.drain()
        return [p.detach().clone() for p in w.model.parameters()]


def test_the_frozen_stage_pipelined_on_two_streams_trains_what_serial_trains() -> None:
    serial, pipelined = (
        _trained(FROZEN, WorkloadOptions(variant=v, batch_size=32, seed=1)) for v in ("serial", "pipelined")
    )
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


SYNCING = """
import torch
from torch import nn
from gpudash.api import Training


def workload(batch_size, device):
    model = nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 10))
    cross_entropy = nn.CrossEntropyLoss()

    def loss_fn(out, y):
        loss = cross_entropy(out, y)
        if loss.item() > 1e6:  # a sync: the host waits for the GPU inside the step
            raise RuntimeError("diverged")
        return loss

    def batch(gen):
        return torch.randn(batch_size, 3, 8, 8, generator=gen), torch.randint(0, 10, (batch_size,), generator=gen)

    return Training(model, loss_fn, torch.optim.SGD(model.parameters(), lr=0.01), batch=batch)
"""


def test_cuda_graph_captures_your_own_step_and_trains_what_eager_trains() -> None:
    """The example's step, captured and replayed, trains the same parameters as eagerly (to the
    rounding a captured graph's kernels may differ by)."""
    eager = _trained(MINE, WorkloadOptions(batch_size=32, seed=1))
    graphed = _trained(MINE, WorkloadOptions(batch_size=32, seed=1, knobs=parse_knobs("cuda_graph")))
    for a, b in zip(eager, graphed, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_a_step_that_syncs_is_refused_cuda_graph_in_one_line_at_the_start(tmp_path: Path) -> None:
    (tmp_path / "syncs.py").write_text(SYNCING)
    r = gpudash(
        *"record out.csv -w syncs.py:workload --device cuda --knob cuda_graph --steps 50 -q".split(),
        cwd=tmp_path,
        timeout=240,
    )
    assert r.returncode == 2, r.stderr
    said = r.stderr.strip().splitlines()[-1]
    assert "knob cuda_graph cannot capture this step" in said and ".item()" in said, r.stderr


def test_turning_cuda_graph_on_for_a_step_that_syncs_keeps_the_run_going(tmp_path: Path) -> None:
    """In a running dashboard the refusal is an error event; the last configuration trains on."""
    (tmp_path / "syncs.py").write_text(SYNCING)
    with build_as(UserWorkload, f"{tmp_path / 'syncs.py'}:workload", "cuda", WorkloadOptions(batch_size=16)) as w:
        got: list[object] = []
        controls = iter([SetKnob("cuda_graph", "on")])
        loop = StepLoop(w, emit=got.append, controls=lambda timeout: next(controls, None), sample_interval_s=0.05)
        loop.run(steps=60)
        errors = [m for m in got if isinstance(m, Event) and m.kind == EventKind.ERROR]
        assert errors and "knob cuda_graph cannot capture this step" in (errors[0].message or "")
        assert w.knobs.text() == "none" and loop.steps_issued == 60
        assert all(torch.isfinite(p).all() for p in w.model.parameters())
