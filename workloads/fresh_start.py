"""The running workload trained as a fresh copy would start: the loss check's arm with the knobs.

A fresh copy of a compiled workload is compiled again (its modules are new objects): 22 s of
ResNet-50's loss check on an H100 (docs/BENCHMARKS.md, "gpudash tune against the exhaustive
sweep"). ``starting_as`` instead gives the running workload, for the length of a ``with`` block,
what a fresh build has at its first step — the weights and buffers of a copy built from the same
seed, no optimizer state, its batches from the first, its generators' states — on the running
configuration, whose compiled and captured code stays valid (every tensor is written in place).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from workloads import memory_probe, tuning
from workloads.memory_probe import RandomStates

if TYPE_CHECKING:  # pragma: no cover
    from workloads.base import Workload


@dataclass(frozen=True)
class StartState:
    """What a workload holds before its first step: each model module's weights and buffers
    (cloned), its generators' states, and their states when its configuration was built (a
    DataLoader draws its workers' seed there)."""

    modules: dict[str, dict[str, torch.Tensor]]
    randomness: RandomStates
    at_setup: RandomStates

    @classmethod
    def of(cls, w: Workload) -> StartState:
        """``w``'s state now (take it before ``w`` steps)."""
        modules = {name: _cloned(m.state_dict()) for name, m in w.model_modules().items()}
        return cls(modules, RandomStates.of(w, w.device), w.random_at_setup)


@contextlib.contextmanager
def starting_as(w: Workload, start: StartState) -> Iterator[None]:
    """While the body runs, ``w`` trains from ``start`` (taken from a fresh build of the same
    family, variant and batch size): that build's weights and buffers, no optimizer state, the
    first batch next, its generators. Afterwards ``w``'s weights, buffers, optimizer state and
    generators are as they were; its batches go on from where the body left them."""
    modules = w.model_modules()
    if modules.keys() != start.modules.keys():
        raise ValueError(f"a start for modules {sorted(start.modules)}, not {sorted(modules)}")
    saved = {name: _buffers(m) for name, m in modules.items()}  # the parameters: restore_point's
    generators = memory_probe.generators_of(w, w.device)
    with tuning.restore_point(w.trained_parameters(), w.optimizer, generators):
        try:
            start.at_setup.put(w, w.device)  # the configuration draws as the fresh build's did (a loader's seed)
            w.restart()  # built again: the first batch next (compiled code kept)
            _load(modules, start.modules)
            _clear_optimizer_state(w.optimizer)
            start.randomness.put(w, w.device)
            yield
        finally:
            w.drain()
            _load(modules, saved, strict=False)


def _cloned(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in state.items()}


def _buffers(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    """``module``'s state but its parameters (batch norm's running statistics, say), cloned."""
    parameters = {name for name, _ in module.named_parameters(remove_duplicate=False)}
    return {k: v.detach().clone() for k, v in module.state_dict().items() if k not in parameters}


def _load(
    modules: dict[str, torch.nn.Module], states: dict[str, dict[str, torch.Tensor]], *, strict: bool = True
) -> None:
    """Each module's weights and buffers from ``states`` (``strict=False``: those it holds),
    copied in place (addresses a captured graph or compiled code holds stay valid)."""
    with torch.no_grad():
        for name, module in modules.items():
            module.load_state_dict(states[name], strict=strict)


def _clear_optimizer_state(optimizer: torch.optim.Optimizer) -> None:
    """Zero every state tensor in place: what SGD's and Adam's next step treat exactly as a fresh
    optimizer's "no state yet" (``tuning.restore_point`` relies on the same)."""
    with torch.no_grad():
        for state in optimizer.state.values():
            for value in state.values():
                if torch.is_tensor(value):
                    value.zero_()
