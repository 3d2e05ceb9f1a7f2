"""A workload written against ``gpudash.api`` (the user's, or ``workloads.vision``), run by the engine.

``-w FILE.py:FUNCTION`` (or ``package.module:FUNCTION``, or an installed entry point): the
workload process imports the file, calls ``FUNCTION(batch_size, device)`` and trains what it
returns, as the reference families' serial variants do (or pipelined, with a frozen first
stage). Whatever goes wrong in the user's code is a ``WorkloadError`` of one line (the traceback
is printed to the workload's log first): at the start the run is refused (exit 2), after a
change the dashboard says why and keeps the last configuration.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import traceback
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from gpudash.api import Training
from workloads import user_spec
from workloads.base import COPY_STAGE, Workload, WorkloadOptions
from workloads.catalog_types import WorkloadError
from workloads.data import loader_bytes_held
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
            sys.path[:] = user_spec.search_path()  # the current directory first, as the parent looked
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
    optimizer, and either a callable ``batch`` or an iterable ``loader``."""
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
        "batch": training.batch is None or callable(training.batch),
        "loader": training.loader is None or isinstance(training.loader, Iterable),
        "frozen": training.frozen is None or isinstance(training.frozen, nn.Module),
    }
    wrong = [field for field, ok in checks.items() if not ok]
    if wrong:
        raise WorkloadError(f"{spec}: {name}() returned a Training whose {', '.join(wrong)} is missing or not usable")
    if (training.batch is None) == (training.loader is None):
        given = "both" if training.batch is not None else "neither"
        raise WorkloadError(f"{spec}: {name}() returned a Training with {given} of batch and loader; give one")
    return training


def checked_batch(spec: str, make: Callable[[torch.Generator], Any], batch_size: int) -> Callable[..., Any]:
    """``make`` (the user's ``batch``), checked at each call: two tensors, ``batch_size`` first."""

    def batch(gen: torch.Generator) -> tuple[Tensor, Tensor]:
        try:
            out = make(gen)
        except BaseException as exc:  # noqa: BLE001 - the user's code
            raise _user_error(spec, "batch()", exc) from exc
        return check_batch(spec, "batch()", out, batch_size)

    return batch


def check_batch(spec: str, what: str, out: object, batch_size: int) -> tuple[Tensor, Tensor]:
    """``out`` as ``(inputs, targets)`` of ``batch_size`` samples each, or a one-line WorkloadError
    (``what`` gave it: "batch()", "the loader")."""
    if not (isinstance(out, (tuple, list)) and len(out) == 2 and all(isinstance(t, Tensor) for t in out)):
        raise WorkloadError(f"{spec}: {what} must give (inputs, targets), two tensors; got {_shape_of(out)}")
    if any(t.dim() == 0 or t.shape[0] != batch_size for t in out):
        shapes = ", ".join(str(tuple(t.shape)) for t in out)
        hint = " (a DataLoader's last batch: drop_last=True)" if what == "the loader" else ""
        raise WorkloadError(f"{spec}: {what} at batch size {batch_size} gave tensors of shapes {shapes}{hint}")
    return out[0], out[1]


class LoaderFeed:
    """The batches of the user's ``loader``, one per step, a new pass when one ends (checked)."""

    def __init__(self, spec: str, loader: Iterable[Any], batch_size: int) -> None:
        self.spec, self.loader, self.batch_size = spec, loader, batch_size
        self._it: Iterator[Any] | None = None

    def next(self) -> tuple[Tensor, Tensor]:
        try:
            for fresh in (False, True):
                if self._it is None:
                    self._it = iter(self.loader)
                try:
                    return check_batch(self.spec, "the loader", next(self._it), self.batch_size)
                except StopIteration:
                    self._it = None
                    if fresh:
                        break
        except WorkloadError:
            raise
        except BaseException as exc:  # noqa: BLE001 - the user's code (a worker's error comes here)
            raise _user_error(self.spec, "the loader", exc) from exc
        raise WorkloadError(f"{self.spec}: the loader gave no batch (an empty dataset, or fewer samples than a batch)")

    def held_bytes(self, batch_bytes: int) -> int:
        """Host bytes its batches hold at once (a DataLoader's prefetch; one batch otherwise)."""
        workers = getattr(self.loader, "num_workers", 0) or 0
        prefetch = getattr(self.loader, "prefetch_factor", None) or 2
        return loader_bytes_held(batch_bytes, workers, bool(getattr(self.loader, "pin_memory", False)), prefetch)

    def close(self) -> None:
        """Let go of the iterator (a DataLoader's workers stop with it)."""
        self._it = None


def _shape_of(value: object) -> str:
    if isinstance(value, tuple):
        return "a tuple of " + ", ".join(type(v).__name__ for v in value)
    return type(value).__name__


class UserWorkload(Workload):
    """The engine's workload over a ``Training`` (``factory.build`` gives it its ``info``)."""

    feed: LoaderFeed | None = None

    def __init__(self, device: torch.device | str, options: WorkloadOptions | None = None) -> None:
        if options is not None and options.image_size is not None:
            raise WorkloadError(
                f"{self.info.name}: --image-size is for the reference families; your batches set theirs"
            )
        super().__init__(device, options)

    def _build_model(self) -> None:
        assert self.info.source is not None  # the registry gives every workload of this kind its source
        self.spec = self.info.source
        self.function = load_function(self.spec)
        training = call(self.spec, self.function, self.batch_size, self.device)
        self.model = training.model.to(self.device).train()
        self.loss_fn = training.loss_fn
        self.optimizer = training.optimizer
        frozen = training.frozen
        self.frozen = frozen.to(self.device).requires_grad_(False).eval() if frozen is not None else None
        if self.frozen is not None:  # the model knobs (channels_last, compile) apply to both stages
            self.knob_modules = ("frozen", "model")  # type: ignore[misc]  # this instance's modules
        self._trainings: dict[int, Training] = {self.batch_size: training}

    def _configure(self) -> None:
        n = self.batch_size
        if n not in self._trainings:  # a new batch size: the function gives its data (its model is not used)
            self._trainings = {n: call(self.spec, self.function, n, self.device)}
        training = self._trainings[n]
        if training.loader is not None:
            self.feed = LoaderFeed(self.spec, training.loader, n)
        else:
            assert training.batch is not None  # call() checked: one of the two
            self.pool = self.host_pool(checked_batch(self.spec, training.batch, n), id(training))
            self._note_images(self.pool.batches[0][0])
        if self.variant_info.pipelined:
            self.pipeline = TwoStagePipeline(self.device, emulate=self.emulate_streams)

    def _release(self) -> None:
        if self.feed is not None:
            self.feed.close()
            self.feed = None
        super()._release()

    def host_bytes_held(self, batch_bytes: int) -> int:
        if self.feed is not None:
            return self.feed.held_bytes(batch_bytes)
        return super().host_bytes_held(batch_bytes)

    def trained_parameters(self) -> list[nn.Parameter]:
        return list(self.model.parameters())

    def _note_images(self, inputs: Tensor) -> None:
        """What the recording says of images: their side (the batches decide it, not --image-size)."""
        if inputs.dim() == 4:
            self.image_size = int(inputs.shape[-1])

    def _draw_input(self) -> tuple[Tensor, ...]:
        if self.feed is not None:
            batch = self.feed.next()
            self._note_images(batch[0])
            return batch
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
        return train_step(self.model, self.loss_fn, self.optimizer, inputs, targets, self._autocast)  # type: ignore[arg-type]  # any callable loss

    def load_and_train(self, inputs: Tensor, targets: Tensor) -> Tensor:
        """Copy a host batch to the device and take one training step on it (no frozen stage)."""
        if self._memory_format is torch.contiguous_format:  # the copies as a user's own loop makes them
            device = self.device
            inputs, targets = inputs.to(device, non_blocking=True), targets.to(device, non_blocking=True)
        else:
            inputs, targets = self.load(inputs, targets)
        return train_step(self.model, self.loss_fn, self.optimizer, inputs, targets, self._autocast)  # type: ignore[arg-type]  # any callable loss

    def _stages(self):  # noqa: ANN202 - see Workload._stages
        """Serial without a frozen stage: copy and train, one function. Pipelined without one: the
        next batch's copy to the device is the first stage (on its own stream, ahead of training)."""
        if self.frozen is not None:
            return ("frozen", self.freeze), ("train", self.train)
        if self.variant_info.pipelined:
            return (COPY_STAGE, self.load), ("train", self.train)
        return None, ("train", self.load_and_train)
