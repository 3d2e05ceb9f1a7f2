"""A workload of the user's own (``gpudash.api.Training``), run by the engine like a reference family.

``-w FILE.py:FUNCTION`` (or ``package.module:FUNCTION``): the workload process imports the file,
calls ``FUNCTION(batch_size, device)`` and trains what it returns, one stream, as the reference
families' serial variants do. Whatever goes wrong in the user's code is a ``WorkloadError`` of
one line (the traceback is printed to the workload's log first): at the start the run is
refused (exit 2), after a change the dashboard says why and keeps the last configuration.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from gpudash.api import Training
from workloads.base import Workload
from workloads.data import HostBatchPool
from workloads.registry import WorkloadError
from workloads.streams import TwoStagePipeline
from workloads.train_step import train_step

WorkloadFunction = Callable[[int, torch.device], Training]


def load_function(spec: str) -> WorkloadFunction:
    """The function ``spec`` names (``FILE.py:FUNCTION`` or ``package.module:FUNCTION``)."""
    source, _, name = spec.rpartition(":")
    try:
        if source.endswith(".py"):
            path = Path(source).resolve()
            module_spec = importlib.util.spec_from_file_location(f"gpudash_user_{path.stem}", path)
            if module_spec is None or module_spec.loader is None:
                raise WorkloadError(f"{spec}: {source} cannot be imported as Python")
            module = importlib.util.module_from_spec(module_spec)
            sys.modules[module_spec.name] = module
            module_spec.loader.exec_module(module)
        else:
            module = importlib.import_module(source)
    except WorkloadError:
        raise
    except BaseException as exc:  # noqa: BLE001 - the user's code: anything, said in one line
        raise _user_error(spec, f"importing {source}", exc) from exc
    fn = getattr(module, name, None)
    if not callable(fn):
        raise WorkloadError(f"{spec}: {source} has no function {name}()")
    return fn  # checked callable; its result is checked when called


class UserCodeError(WorkloadError):
    """The user's code raised: one line here, the traceback in the workload's log (kept, named)."""

    traceback_in_log = True


def _user_error(spec: str, doing: str, exc: BaseException) -> WorkloadError:
    """The user's exception as one line; its traceback goes to the log (the workload's stderr)."""
    traceback.print_exception(exc)
    last = str(exc).strip().splitlines()[-1:] or [""]
    return UserCodeError(f"{spec}: {doing} raised {type(exc).__name__}: {last[0]}")


def call(spec: str, fn: WorkloadFunction, batch_size: int, device: torch.device) -> Training:
    """``fn(batch_size, device)``, checked: a ``Training`` with a module, a callable loss, an
    optimizer and a callable ``batch``."""
    name = spec.rpartition(":")[2]
    try:
        training = fn(batch_size, device)
    except BaseException as exc:  # noqa: BLE001 - the user's code
        raise _user_error(spec, f"{name}({batch_size}, {device})", exc) from exc
    if not isinstance(training, Training):
        raise WorkloadError(f"{spec}: {name}() returned {type(training).__name__}, not gpudash.api.Training")
    checks = {
        "model": isinstance(training.model, nn.Module),
        "loss_fn": callable(training.loss_fn),
        "optimizer": isinstance(training.optimizer, torch.optim.Optimizer),
        "batch": callable(training.batch),
        "frozen": training.frozen is None or isinstance(training.frozen, nn.Module),
    }
    wrong = [field for field, ok in checks.items() if not ok]
    if wrong:
        raise WorkloadError(f"{spec}: {name}() returned a Training whose {', '.join(wrong)} is missing or not usable")
    return training


def checked_batch(spec: str, make: Callable[[torch.Generator], Any], batch_size: int) -> Callable[..., Any]:
    """``make`` (the user's ``batch``), checked at each call: two tensors, ``batch_size`` first."""

    def batch(gen: torch.Generator) -> tuple[Tensor, Tensor]:
        try:
            out = make(gen)
        except BaseException as exc:  # noqa: BLE001 - the user's code
            raise _user_error(spec, "batch()", exc) from exc
        if not (isinstance(out, tuple) and len(out) == 2 and all(isinstance(t, Tensor) for t in out)):
            raise WorkloadError(f"{spec}: batch() must return (inputs, targets), two tensors; got {_shape_of(out)}")
        if any(t.dim() == 0 or t.shape[0] != batch_size for t in out):
            shapes = ", ".join(str(tuple(t.shape)) for t in out)
            raise WorkloadError(f"{spec}: batch() at batch size {batch_size} gave tensors of shapes {shapes}")
        return out[0], out[1]

    return batch


def _shape_of(value: object) -> str:
    if isinstance(value, tuple):
        return "a tuple of " + ", ".join(type(v).__name__ for v in value)
    return type(value).__name__


class UserWorkload(Workload):
    """The engine's workload over a ``Training`` (``factory.build`` gives it its ``info``)."""

    def _build_model(self) -> None:
        self.spec = self.info.name
        self.function = load_function(self.spec)
        training = call(self.spec, self.function, self.batch_size, self.device)
        self.model = training.model.to(self.device).train()
        self.loss_fn = training.loss_fn
        self.optimizer = training.optimizer
        frozen = training.frozen
        self.frozen = frozen.to(self.device).requires_grad_(False).eval() if frozen is not None else None
        if self.frozen is not None:  # the model knobs (channels_last, compile) apply to both stages
            self.knob_modules = ("frozen", "model")  # type: ignore[misc]  # this instance's modules
        self._batches: dict[int, Callable[..., Any]] = {self.batch_size: training.batch}

    def _configure(self) -> None:
        n = self.batch_size
        if self.variant_info.pipelined and self.frozen is None:
            raise WorkloadError(f"{self.spec}/pipelined needs a frozen first stage (Training.frozen) to overlap")
        if n not in self._batches:  # a new batch size: the function gives its batch (its model is not used)
            self._batches = {n: call(self.spec, self.function, n, self.device).batch}
        make = checked_batch(self.spec, self._batches[n], n)
        self.pool = HostBatchPool(make, seed=self.data_seed, pin=self.on_cuda)
        if self.variant_info.pipelined:
            self.pipeline = TwoStagePipeline(self.device, emulate=self.emulate_streams)

    def trained_parameters(self) -> list[nn.Parameter]:
        return list(self.model.parameters())

    def _draw_input(self) -> tuple[Tensor, ...]:
        assert self.pool is not None  # built by _configure
        return self.pool.next()

    def load(self, inputs: Tensor, targets: Tensor) -> tuple[Tensor, Tensor]:
        """Copy a host batch to the device."""
        inputs, targets = self.to_device((inputs, targets))
        return inputs, targets

    def freeze(self, inputs: Tensor, targets: Tensor) -> tuple[Tensor, Tensor]:
        """The first stage: copy a host batch to the device and run the frozen module on it."""
        inputs, targets = self.load(inputs, targets)
        assert self.frozen is not None  # this stage exists only with it
        with torch.no_grad(), self.autocast():
            features = self.frozen(inputs)
        return features, targets

    def train(self, inputs: Tensor, targets: Tensor) -> Tensor:
        """One training step of ``model`` on a batch on the device."""
        return train_step(self.model, self.loss_fn, self.optimizer, inputs, targets, self.autocast)  # type: ignore[arg-type]  # any callable loss

    def load_and_train(self, inputs: Tensor, targets: Tensor) -> Tensor:
        """Copy a host batch to the device and take one training step on it (no frozen stage)."""
        return self.train(*self.load(inputs, targets))

    def _stages(self):  # noqa: ANN202 - see Workload._stages
        if self.frozen is None:
            return None, ("train", self.load_and_train)
        return ("frozen", self.freeze), ("train", self.train)
