"""The job's frozen parameters, as gpudash's hooks see them (``gpudash_job_memory.py``, beside this
file). Standard library and the job's own torch only.

A distillation's teacher, a fine-tuned model's frozen base (LoRA's, an adapter's), an embedding left
untrained: parameters that the step's modules hold and no optimizer steps. They hold memory as the
trained ones do, and no batch changes it — a count of the optimizers' parameters alone leaves them
to look like activations (what a batch more would cost). Counted over the sampled step: a global
forward pre-hook (``register_module_forward_pre_hook``) notes each module the step calls, and at the
step's end each such module's own parameters (``parameters(recurse=False)``) on the job's device
whose storage no optimizer holds are counted, each storage once (tied weights, a parameter two
modules share). A parameter the step does not touch (a module never called) is not the step's."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any


class ModulesCalled:
    """The modules the job calls from now until ``close()``; ``frozen_bytes()`` then. ``local``: a
    DTensor's shard on this rank, any other tensor itself (``core/tensor_bytes.local``)."""

    def __init__(self, torch: Any, device: str, local: Callable[[Any], Any]) -> None:
        self.device, self.local = device, local
        self.modules: dict[int, Any] = {}
        self.handle = torch.nn.modules.module.register_module_forward_pre_hook(self._called)

    def _called(self, module: Any, _args: Any) -> None:
        self.modules[id(module)] = module

    def close(self) -> None:
        handle, self.handle = self.handle, None
        if handle is not None:
            with contextlib.suppress(Exception):
                handle.remove()

    def frozen_bytes(self, trained: set[int]) -> int:
        """Bytes of the called modules' parameters on the job's device whose storages are not in
        ``trained`` (the optimizers'), each storage once; the modules let go."""
        self.close()
        held: dict[int, int] = {}
        for module in self.modules.values():
            with contextlib.suppress(Exception):  # a module whose parameters cannot be listed: none
                for p in module.parameters(recurse=False):
                    tensor = self.local(p)
                    if not on_device(tensor, self.device):
                        continue
                    try:
                        storage = tensor.untyped_storage()
                        key, size = storage.data_ptr() or id(tensor), int(storage.nbytes())
                    except Exception:  # noqa: BLE001 - no plain storage: its elements' bytes
                        key, size = id(tensor), int(tensor.numel() * tensor.element_size())
                    if key not in trained:
                        held[key] = size
        self.modules = {}
        return sum(held.values())


def on_device(tensor: Any, device: str) -> bool:
    """The tensor lives on the job's device (``cuda:0``, ``cpu``): not offloaded, not on meta."""
    where = tensor.device
    kind, _, index = device.partition(":")
    return bool(where.type == kind and (not index or where.index is None or str(where.index) == index))
