"""The job's frozen parameters, as gpudash's hooks see them (``memory_count.py``). Standard library
and the job's own torch only.

A distillation's teacher, a fine-tuned model's frozen base (LoRA's, an adapter's), an embedding left
untrained: parameters that the step's modules hold, that do not require grad and that no optimizer
steps. They hold memory as the trained ones do, and no batch changes it — a count of the optimizers'
parameters alone leaves them to look like activations (what a batch more would cost). Found over
the sampled step: a global forward pre-hook (``register_module_forward_pre_hook``) notes each module
the step calls (weakly); at the step's end each such module's own parameters
(``parameters(recurse=False)``) on the job's device that do not require grad are kept, weakly, and
counted then and whenever the optimizers are counted again (a base unfrozen later, added to an
optimizer, leaves the count): each storage once (tied weights, a parameter two modules share), those
an optimizer holds left out. A parameter the step does not touch (a module never called) is not
the step's; one that requires grad and that no optimizer gpudash sees steps (a framework's own
fp32 copies) is not called frozen."""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Callable
from typing import Any


class ModulesCalled:
    """The modules the job calls from now until ``close()``; ``frozen()`` then. ``local``: a
    DTensor's shard on this rank, any other tensor itself (``core/tensor_bytes.local``)."""

    def __init__(self, torch: Any, device: str, local: Callable[[Any], Any]) -> None:
        self.device, self.local = device, local
        self.modules: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()
        self.handle = torch.nn.modules.module.register_module_forward_pre_hook(self._called)

    def _called(self, module: Any, _args: Any) -> None:
        with contextlib.suppress(TypeError):  # (a module that cannot be referred to weakly: not noted)
            self.modules[id(module)] = module

    def close(self) -> None:
        handle, self.handle = self.handle, None
        if handle is not None:
            with contextlib.suppress(Exception):
                handle.remove()

    def frozen(self) -> list[weakref.ref[Any]]:
        """The called modules' parameters on the job's device that do not require grad, weakly; the
        watch closed and the modules let go."""
        self.close()
        out: list[weakref.ref[Any]] = []
        for module in list(self.modules.values()):
            with contextlib.suppress(Exception):  # a module whose parameters cannot be listed: none
                out += [
                    weakref.ref(p)
                    for p in module.parameters(recurse=False)
                    if not p.requires_grad and on_device(self.local(p), self.device)
                ]
        self.modules = weakref.WeakValueDictionary()
        return out


def frozen_bytes(
    params: list[weakref.ref[Any]], trained: set[int], add_storage: Callable[[dict[int, int], Any], None]
) -> int:
    """Bytes of those parameters still alive and frozen whose storages are not in ``trained`` (the
    optimizers'), each storage once (``add_storage``: ``core/tensor_bytes.add_storage``)."""
    held: dict[int, int] = {}
    for ref in params:
        p = ref()
        if p is not None and not p.requires_grad:
            add_storage(held, p)
    return sum(size for key, size in held.items() if key not in trained)


def on_device(tensor: Any, device: str) -> bool:
    """The tensor lives on the job's device (``cuda:0``, ``cpu``): not offloaded, not on meta."""
    where = tensor.device
    kind, _, index = device.partition(":")
    return bool(where.type == kind and (not index or where.index is None or str(where.index) == index))
