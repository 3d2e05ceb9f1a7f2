"""The loss check's knobbed arm runs on the running workload, started as a fresh copy would start
(``workloads.fresh_start``): it must train exactly as that fresh copy, and leave the running
workload's training state as it found it."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from workloads.base import Workload, WorkloadOptions
from workloads.factory import build
from workloads.fresh_start import StartState, starting_as
from workloads.knobs import Knobs, parse_knobs

ROOT = Path(__file__).resolve().parents[1]
CASES = [  # family, variant, knobs: each kind of state a start must reset
    ("sync_loss", "fixed", "amp=bf16"),  # SGD momentum
    ("encdec", "serial", "channels_last"),  # a frozen first stage, relaid weights
    ("augment", "gpu-vectorized", "channels_last"),  # augmentation drawn from the default generator
    ("augment", "cpu", "amp=bf16"),  # batches from DataLoader workers
    ("vit_b_16", "serial", "amp=bf16"),  # AdamW: moments and a step count
    ("resnet50", "serial", "channels_last"),  # batch norm's running statistics (buffers, not parameters)
    (f"{ROOT / 'examples' / 'frozen_trunk.py'}:workload", None, "channels_last"),  # a user's file
]


def _build(name: str, variant: str | None, knobs: Knobs) -> Workload:
    return build(name, "cpu", WorkloadOptions(variant=variant, batch_size=2, seed=3, workers=1, knobs=knobs))


def _losses(w: Workload, steps: int) -> list[float]:
    out = []
    for _ in range(steps):
        w.step()
        assert w.last_loss is not None
        out.append(float(w.last_loss))
    return out


def _training_state(w: Workload) -> list[torch.Tensor]:
    modules = [t.clone() for m in w.model_modules().values() for t in m.state_dict().values()]
    optimizer = [v.clone() for s in w.optimizer.state.values() for v in s.values() if torch.is_tensor(v)]
    return modules + optimizer


@pytest.mark.slow
@pytest.mark.parametrize(("name", "variant", "knobs"), CASES, ids=[f"{c[0].split('/')[-1]}-{c[2]}" for c in CASES])
def test_the_running_workload_started_as_a_fresh_copy_trains_as_that_copy_and_is_put_back(
    name: str, variant: str | None, knobs: str
) -> None:
    with _build(name, variant, parse_knobs(knobs)) as fresh:
        expected = _losses(fresh, 4)
    with _build(name, variant, parse_knobs(knobs)) as w:
        _losses(w, 3)  # it has trained: weights, optimizer state, batches and generators moved on
        with _build(name, variant, Knobs()) as plain:  # the start the loss check takes: a plain copy's
            start = StartState.of(plain)
        before = _training_state(w)
        with starting_as(w, start):
            got = _losses(w, 4)
        after = _training_state(w)
        assert got == expected  # exactly: the same start, batches, draws and arithmetic
        assert len(after) == len(before) and all(torch.equal(a, b) for a, b in zip(before, after, strict=True))
        assert _losses(w, 1)[0] > 0  # and it trains on


def test_a_start_for_another_model_is_refused_and_changes_nothing() -> None:
    with _build("sync_loss", "fixed", Knobs()) as other:
        start = StartState.of(other)
    with _build("encdec", "serial", Knobs()) as w:
        before = _training_state(w)
        with pytest.raises(ValueError, match="a start for modules"), starting_as(w, start):
            pass
        assert all(torch.equal(a, b) for a, b in zip(before, _training_state(w), strict=True))


GPU_CASES = [  # on the device: captured graphs, a second stream and an augmentation generator
    ("encdec", "pipelined", "amp=bf16,channels_last,cudnn_benchmark,cuda_graph"),
    ("augment", "pipelined", "channels_last,cuda_graph"),
    ("resnet50", "pipelined", "amp=bf16,channels_last"),
]


@pytest.mark.gpu
@pytest.mark.parametrize(("name", "variant", "knobs"), GPU_CASES, ids=[c[0] for c in GPU_CASES])
def test_on_a_gpu_the_started_workload_trains_as_a_fresh_copy_and_is_put_back(
    name: str, variant: str, knobs: str
) -> None:
    def make(k: Knobs) -> Workload:
        return build(name, "cuda", WorkloadOptions(variant=variant, batch_size=8, seed=3, knobs=k))

    with make(parse_knobs(knobs)) as fresh:
        expected = _losses(fresh, 4)
    with make(parse_knobs(knobs)) as w:
        _losses(w, 3)
        with make(Knobs()) as plain:
            start = StartState.of(plain)
        before = _training_state(w)
        with starting_as(w, start):
            got = _losses(w, 4)
        after = _training_state(w)
        # the same kernels on the same numbers; cuDNN's backward may sum in another order
        assert got == pytest.approx(expected, rel=1e-4)
        assert all(torch.equal(a, b) for a, b in zip(before, after, strict=True))
