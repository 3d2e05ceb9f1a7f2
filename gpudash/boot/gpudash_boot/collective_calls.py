"""What a call of ``torch.distributed``'s names, as gpudash's collective timer reads it
(``comm.py``): the collective's kind (``KINDS``: each function timed), its process group, its bytes
and its device. Duck-typed over the job's torch (no import of it): standard library only."""

from __future__ import annotations

from typing import Any

# torch.distributed's functions timed, and the kind each is (the kinds' times come from traces)
KINDS = {
    "all_reduce": "all-reduce",
    "all_reduce_coalesced": "all-reduce",
    "all_gather_single": "all-gather",  # FSDP2's, from torch 2.12 on
    "reduce_scatter_single": "reduce-scatter",
    "all_gather_into_tensor": "all-gather",
    "all_gather": "all-gather",
    "_all_gather_base": "all-gather",
    "reduce_scatter_tensor": "reduce-scatter",
    "reduce_scatter": "reduce-scatter",
    "_reduce_scatter_base": "reduce-scatter",
    "broadcast": "broadcast",
    "all_to_all_single": "all-to-all",
    "all_to_all": "all-to-all",
    "reduce": "reduce",
    "barrier": "barrier",
}


def group_of(args: Any, kwargs: Any) -> Any:
    """The process group a call names (None: the default one)."""
    for value in (*args, *kwargs.values()):
        if type(value).__name__ == "ProcessGroup":
            return value
    return None


def group_id(args: Any, kwargs: Any) -> int:
    """The id of the process group a call names (0: the default one)."""
    group = group_of(args, kwargs)
    return 0 if group is None else id(group)


def nbytes(value: Any) -> int:
    """A tensor's bytes (a list's tensors' together: an all-gather's outputs); 0 for anything else."""
    if isinstance(value, (list, tuple)):
        return sum(nbytes(v) for v in value)
    try:
        return int(value.numel()) * int(value.element_size()) if hasattr(value, "element_size") else 0
    except Exception:  # noqa: BLE001 - a tensor-like that is not one
        return 0


def device_of(args: Any, kwargs: Any) -> Any:
    """The device of the collective's first tensor (None: the current one)."""
    for value in (*args, *kwargs.values()):
        found = value[0] if isinstance(value, (list, tuple)) and value else value
        if hasattr(found, "is_cuda"):
            return found.device
    return None


def on_cuda(args: Any, kwargs: Any) -> bool:
    """The collective's tensors are on a GPU (the first tensor found)."""
    for value in (*args, *kwargs.values()):
        found = value[0] if isinstance(value, (list, tuple)) and value else value
        device = getattr(found, "device", None)
        if device is not None and hasattr(found, "is_cuda"):
            return bool(found.is_cuda)
    return False
