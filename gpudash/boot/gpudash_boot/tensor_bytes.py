"""The bytes a training step's optimizer holds, by kind — its parameters, their gradients, its state —
every storage once (an FSDP2 parameter: this rank's shard). Duck-typed over torch's tensors, no
torch import: read by the job's hooks (``memory_count.py``, ``oom_watch.py``) and by gpudash's own
step loop (``gpudash/engine/loop_state.py``)."""

from __future__ import annotations

from typing import Any


def count_kinds(*optimizers: Any) -> dict[str, int]:
    """Bytes of the optimizers' parameters, their gradients and their state (each storage once: a
    parameter two optimizers share, or tied weights, counted once)."""
    params: dict[int, int] = {}
    grads: dict[int, int] = {}
    state: dict[int, int] = {}
    for optimizer in optimizers:
        for group in optimizer.param_groups:
            for p in group["params"]:
                add_storage(params, p)
                if getattr(p, "grad", None) is not None:
                    add_storage(grads, p.grad)
        for values in optimizer.state.values():
            for value in values.values() if isinstance(values, dict) else ():
                if hasattr(value, "untyped_storage"):
                    add_storage(state, value)
    return {"params": sum(params.values()), "grads": sum(grads.values()), "optimizer": sum(state.values())}


def local(tensor: Any) -> Any:
    """A DTensor's shard on this rank; any other tensor itself."""
    return tensor.to_local() if hasattr(tensor, "to_local") else tensor


def add_storage(into: dict[int, int], tensor: Any) -> None:
    """``into[storage] = bytes`` for the tensor's storage (its shard's, a DTensor's): each storage once."""
    local_ = local(tensor)
    try:
        storage = local_.untyped_storage()
        into[storage.data_ptr() or id(local_)] = int(storage.nbytes())
    except Exception:  # noqa: BLE001 - no plain storage: its elements' bytes
        into[id(local_)] = int(local_.numel() * local_.element_size())


def storages(*optimizers: Any) -> set[int]:
    """The storages of the optimizers' parameters (not activations): what a count of saved tensors
    leaves out. Not their gradients: a step's ``zero_grad(set_to_none=True)`` frees them, and an
    activation the allocator puts where one was would be left out (a ReLU's output went uncounted
    now and then)."""
    out: set[int] = set()
    for optimizer in optimizers:
        for group in optimizer.param_groups:
            for p in group["params"]:
                try:
                    out.add(local(p).untyped_storage().data_ptr())
                except Exception:  # noqa: BLE001, S112 - no plain storage: nothing to leave out
                    continue
    return out
