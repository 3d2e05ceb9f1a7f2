"""A small MLP's training step: a launch-bound step of about a millisecond on an H100, where a
per-step cost shows most (``host_call_cost``, ``track_overhead``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


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
