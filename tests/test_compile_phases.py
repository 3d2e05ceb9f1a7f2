"""A compile is no evaluation (issue 90): torch's own ``inference_mode`` blocks — each fake tensor
torch.compile makes while it traces, and gpudash's FLOP count of a compiled model makes — are not
the job's, so no "phase: evaluation under way" comes of them; the job's own blocks, written or as a
decorator, still are."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from gpudash.boot.gpudash_boot.phase_signals import PhaseSignals
from gpudash.boot.gpudash_boot.phases import Phases

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("compiles_forgotten")]  # dynamo's import, a compile: 4 s


@pytest.fixture
def told() -> Iterator[list[bool]]:
    """The signals installed over torch as a job's hooks install them; each ``inference`` signal kept."""
    phases = Phases(lambda message: None, lambda: 0)
    calls: list[bool] = []
    phases.inference = calls.append  # type: ignore[method-assign,assignment]
    signals = PhaseSignals(phases)
    signals.install(torch)
    try:
        yield calls
    finally:
        signals.uninstall()


def test_a_compile_and_its_fake_tensors_are_no_evaluation(told: list[bool]) -> None:
    model = torch.compile(torch.nn.Linear(4, 4), backend="eager")  # dynamo's tracing makes fake tensors
    model(torch.randn(2, 4)).sum().backward()
    with FakeTensorMode() as mode:
        fake = mode.from_tensor(torch.randn(4, 4))
        (fake @ fake).sum()
    assert told == []


def test_the_jobs_own_inference_blocks_are_said_as_written_and_as_a_decorator(told: list[bool]) -> None:
    @torch.inference_mode()
    def evaluate(x: torch.Tensor) -> torch.Tensor:
        return x * 2

    with torch.inference_mode():
        torch.randn(2) * 2
    evaluate(torch.randn(2))
    assert told == [True, False, True, False]
