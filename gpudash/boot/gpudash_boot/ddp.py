"""DDP's and FSDP2's side of a rank's collectives, for gpudash's hooks (``comm.py``). Standard
library and the job's own torch only.

DDP reduces its buckets in C++, out of Python's sight: a model wrapped in
``DistributedDataParallel`` gets, at its first forward, DDP's own reference hook
(``default_hooks.allreduce_hook``: the same division and all-reduce as DDP without a hook) on its
own process group — unless the job registered a hook of its own, whose collectives are timed as
they go through ``torch.distributed``. The DDP arguments that set its speed (bucket size,
``gradient_as_bucket_view``, ``static_graph``, ``find_unused_parameters``) are read there too, for
the diagnosis' remedies, and whether a forward runs under ``no_sync()`` (the job accumulates
gradients already). DDP's broadcast of its buffers at each forward runs in C++ and makes the
calling stream wait for it: it is timed by a pair of events on that stream around the call.
Without the broadcast the lead rank's lateness was not seen: the other ranks wait for it there, at
the forward, and not in the gradients' all-reduce. DDP's own bookkeeping around each forward (its
buckets' rebuild, its logger's timers) syncs where torch prints its own warnings: quiet.
"""

from __future__ import annotations

import functools
import time
from typing import Any

from .frames import hidden

NO_SYNC = "ddp_no_sync"  # a DDP model's setting ("True"): some of its forwards run under no_sync()


class DdpHooks:
    """``install()`` DDP's wrappers for ``comms`` (a ``comm.CommTimes``), ``uninstall()``
    them; ``comms.settings`` gets a DDP model's arguments, ``comms.untimed`` what of DDP is not timed."""

    def __init__(self, comms: Any) -> None:
        self.comms = comms
        self.originals: dict[str, Any] = {}
        self.no_sync = False  # a forward under no_sync() seen

    def install(self) -> None:
        ddp = self.comms.torch.nn.parallel.DistributedDataParallel
        kept = self.originals
        if hasattr(ddp, "_pre_forward"):
            kept["_pre_forward"], ddp._pre_forward = ddp._pre_forward, self._pre_forward(ddp._pre_forward)
        if hasattr(ddp, "_post_forward"):
            kept["_post_forward"], ddp._post_forward = ddp._post_forward, self._quietly(ddp._post_forward)
        if hasattr(ddp, "_distributed_broadcast_coalesced"):
            original = ddp._distributed_broadcast_coalesced
            kept["_distributed_broadcast_coalesced"] = original
            ddp._distributed_broadcast_coalesced = self._broadcast(original)
        if hasattr(ddp, "register_comm_hook"):
            kept["register_comm_hook"] = ddp.register_comm_hook
            ddp.register_comm_hook = self._users_hook(ddp.register_comm_hook)
        if hasattr(ddp, "_register_builtin_comm_hook"):
            kept["_register_builtin_comm_hook"] = ddp._register_builtin_comm_hook
            ddp._register_builtin_comm_hook = self._users_hook(ddp._register_builtin_comm_hook)

    def uninstall(self) -> None:
        ddp = self.comms.torch.nn.parallel.DistributedDataParallel
        for name, original in self.originals.items():
            setattr(ddp, name, original)
        self.originals = {}

    def _pre_forward(self, original: Any) -> Any:
        hooks, comms = self, self.comms

        @functools.wraps(original)
        def pre_forward(ddp: Any, *args: Any, **kwargs: Any) -> Any:
            if not getattr(ddp, "gpudash_seen", False):
                ddp.gpudash_seen = True
                hooks._first_forward(ddp)
            if not hooks.no_sync and getattr(ddp, "require_backward_grad_sync", True) is False:
                hooks.no_sync = True  # a forward under no_sync(): the job accumulates already (said once)
                comms.settings[NO_SYNC] = "True"
            with comms.quiet():  # DDP's own bookkeeping (its buckets' rebuild, its logger's timers)
                return original(ddp, *args, **kwargs)

        return hidden(pre_forward)

    def _broadcast(self, original: Any) -> Any:
        """DDP's broadcast of its buffers at each forward (C++: no work to time): over NCCL a pair of
        events on the calling stream, which waits for the broadcast (on a step whose NCCL
        collectives are timed); over gloo the call's time."""
        comms = self.comms

        @functools.wraps(original)
        def broadcast(ddp: Any, tensors: Any, *args: Any, **kwargs: Any) -> Any:
            group = getattr(ddp, "process_group", None)
            cuda = bool(tensors) and bool(getattr(tensors[0], "is_cuda", False))
            nccl = cuda and comms.to_nccl((group,), {})
            entered = time.monotonic()
            arrival = comms.event((tensors,), {}) if nccl and comms.timing else None
            with comms.quiet():
                result = original(ddp, tensors, *args, **kwargs)
            if arrival is not None:
                comms.stream_pair(entered, arrival, comms.event((tensors,), {}), id(group))
            elif not nccl:
                comms.took(entered, time.monotonic())
            return result

        return hidden(broadcast)

    def _quietly(self, original: Any) -> Any:
        comms = self.comms

        @functools.wraps(original)
        def quietly(*args: Any, **kwargs: Any) -> Any:
            with comms.quiet():
                return original(*args, **kwargs)

        return hidden(quietly)

    def _first_forward(self, ddp: Any) -> None:
        """A DDP model's first forward: its arguments read, DDP's reference hook on its buckets."""
        comms = self.comms
        comms.settings = {
            "ddp_bucket_cap_mb": f"{getattr(ddp, 'bucket_bytes_cap', 25 * 1024 * 1024) / (1024 * 1024):g}",
            "ddp_gradient_as_bucket_view": str(bool(getattr(ddp, "gradient_as_bucket_view", False))),
            "ddp_static_graph": str(bool(getattr(ddp, "static_graph", False))),
            "ddp_find_unused_parameters": str(bool(getattr(ddp, "find_unused_parameters", False))),
            "ddp_grad_mb": f"{_grad_bytes(ddp) / (1024 * 1024):.4g}",  # what its buckets hold in all
        }
        if getattr(ddp, "gpudash_users_hook", False):
            return  # the job's own hook: its collectives are timed as they go through torch.distributed
        try:
            from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

            self.originals["register_comm_hook"](ddp, ddp.process_group, default_hooks.allreduce_hook)
        except Exception as exc:  # noqa: BLE001 - DDP refused (a version without comm hooks): not timed
            comms.untimed = f"DDP's all-reduce is not timed ({type(exc).__name__}: {exc})"

    def _users_hook(self, original: Any) -> Any:
        comms = self.comms

        @functools.wraps(original)
        def register(ddp: Any, *args: Any, **kwargs: Any) -> Any:
            ddp.gpudash_users_hook = True
            if original.__name__ == "_register_builtin_comm_hook":
                comms.untimed = "DDP's built-in communication hook runs in C++: its all-reduce is not timed"
            return original(ddp, *args, **kwargs)

        return hidden(register)


def sharded(optimizer: Any) -> dict[str, str]:
    """{"fsdp": "2"} where the optimizer steps sharded parameters (FSDP2's DTensors), else {}."""
    for group in optimizer.param_groups:
        for p in group["params"]:
            return {"fsdp": "2"} if type(p).__name__ == "DTensor" else {}
    return {}


def _grad_bytes(ddp: Any) -> int:
    """The bytes of the gradients a DDP model's all-reduce carries: its parameters that need them."""
    try:
        return sum(int(p.numel()) * int(p.element_size()) for p in ddp.parameters() if p.requires_grad)
    except Exception:  # noqa: BLE001 - a model that cannot say: no figure (0), no advice drawn from it
        return 0
