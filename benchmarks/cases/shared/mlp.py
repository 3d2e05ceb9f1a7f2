"""A small MLP's training step: a launch-bound step of about a millisecond on an H100, where a
per-step cost shows most (``host_call_cost``, ``track_overhead``), and the parameters it takes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from benchmarks.harness.params import OnDevice, param


@dataclass(frozen=True)
class MlpParams(OnDevice):
    """The parameters of a case that times the MLP's step: its device, width and batch (the
    case's own parameters follow, in a dataclass that derives from this one)."""

    hidden: int = param(256, "the MLP's hidden width")
    batch: int = param(128, "the MLP's batch")


def mlp_train_step(torch: Any, device: Any, hidden: int = 256, batch: int = 128) -> Callable[[], None]:
    """A small MLP's training step (64-``hidden``-10, seeded): ``batch`` random inputs made on the
    device, forward, backward, SGD."""
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, hidden), nn.ReLU(), nn.Linear(hidden, 10)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    def train_step() -> None:
        x, y = torch.randn(batch, 64, device=device), torch.randn(batch, 10, device=device)
        loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    return train_step


def torch_device(torch: Any, name: str) -> Any:
    """``torch.device(name)``, made the current GPU where it names one; a CUDA device without CUDA
    here is refused (``Unavailable``)."""
    from benchmarks.harness.case import Unavailable

    device = torch.device(name)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise Unavailable(f"-p device={name} needs CUDA (-p device=cpu runs on the CPU)")
        if device.index is not None:
            torch.cuda.set_device(device)
    return device
