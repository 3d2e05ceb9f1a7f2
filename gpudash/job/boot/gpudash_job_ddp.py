"""DDP's and FSDP2's side of a rank's collectives, for gpudash's hooks (``gpudash_job_comm.py``,
beside this file). Standard library and the job's own torch only.

DDP reduces its gradient buckets in C++, out of Python's sight, and gpudash leaves it so: no comm
hook of gpudash's (DDP's reference Python hook cost a DDP ResNet-50 step little on 2 H200s but a
DDP of 3.9 ms steps in 9 buckets 0.76× of its speed, and a 10 ms gloo step on 2 CPUs 0.73–0.87×).
What a rank's step waits for in them is timed at the end of its backward pass instead, where it
shows: each DDP forward that prepares a reduction (grad on, not under ``no_sync``) puts a hook on
its output's gradient, which queues a callback for the end of that backward pass. That callback
runs after every gradient was computed and every bucket's all-reduce launched — the rank's
*arrival* — and before DDP's own end-of-backward, which waits for the buckets' all-reduces (over
NCCL its stream waits for them; over gloo its host does); it queues a second callback, which runs
after DDP's and marks their *end*. From the one to the other is what the rank's step waited for its
gradients' reduction beyond its own backward: the transfer still under way, and the wait for a
slower rank. Over NCCL by a CUDA event on the caller's stream at each (on a step whose NCCL
collectives are timed), else by the host's clock. A hook the job registers (``register_comm_hook``)
changes nothing here: the reduction still ends where DDP's end-of-backward waits for it (and the
hook's own ``torch.distributed`` calls are timed as any). Over a profiler window the buckets' bytes
(DDP's own account, its logger's) size the all-reduces the trace's kernels do not.

DDP's broadcast of its buffers at each forward runs in C++ and makes the calling stream wait for it:
it is timed by a pair of events on that stream around the call. Without the broadcast the lead rank's
lateness was not seen: the other ranks wait for it there, at the forward, and not in the gradients'
all-reduce. DDP's arguments that set its speed (bucket size, ``gradient_as_bucket_view``,
``static_graph``, ``find_unused_parameters``) are read at its first forward, for the diagnosis'
remedies; DDP's own bookkeeping around each forward (its buckets' rebuild, its logger's timers)
syncs where torch prints its own warnings: quiet.
"""

from __future__ import annotations

import functools
import time
from typing import Any

from gpudash_job_frames import hidden  # type: ignore[import-not-found]  # beside this file


class DdpHooks:
    """``install()`` DDP's wrappers for ``comms`` (a ``gpudash_job_comm.CommTimes``), ``uninstall()``
    them; ``comms.settings`` gets a DDP model's arguments."""

    def __init__(self, comms: Any) -> None:
        self.comms = comms
        self.originals: dict[str, Any] = {}

    def install(self) -> None:
        ddp = self.comms.torch.nn.parallel.DistributedDataParallel
        kept = self.originals
        if hasattr(ddp, "_pre_forward"):
            kept["_pre_forward"], ddp._pre_forward = ddp._pre_forward, self._pre_forward(ddp._pre_forward)
        if hasattr(ddp, "_post_forward"):
            kept["_post_forward"], ddp._post_forward = ddp._post_forward, self._post_forward(ddp._post_forward)
        if hasattr(ddp, "_distributed_broadcast_coalesced"):
            original = ddp._distributed_broadcast_coalesced
            kept["_distributed_broadcast_coalesced"] = original
            ddp._distributed_broadcast_coalesced = self._broadcast(original)

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
            with comms.quiet():  # DDP's own bookkeeping (its buckets' rebuild, its logger's timers)
                return original(ddp, *args, **kwargs)

        return hidden(pre_forward)

    def _post_forward(self, original: Any) -> Any:
        """DDP's bookkeeping after its forward, quiet; then the reduction its backward will make timed."""
        hooks, comms = self, self.comms

        @functools.wraps(original)
        def post_forward(ddp: Any, *args: Any, **kwargs: Any) -> Any:
            with comms.quiet():
                output = original(ddp, *args, **kwargs)
            hooks._time_reduction(ddp, output)
            return output

        return hidden(post_forward)

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

    def _first_forward(self, ddp: Any) -> None:
        """A DDP model's first forward: its arguments read."""
        words = [
            f"ddp_bucket_cap_mb={getattr(ddp, 'bucket_bytes_cap', 25 * 1024 * 1024) / (1024 * 1024):g}",
            f"ddp_gradient_as_bucket_view={bool(getattr(ddp, 'gradient_as_bucket_view', False))}",
            f"ddp_static_graph={bool(getattr(ddp, 'static_graph', False))}",
            f"ddp_find_unused_parameters={bool(getattr(ddp, 'find_unused_parameters', False))}",
        ]
        self.comms.settings = ",".join(words)

    # -- the gradients' reduction, timed at the end of the backward pass ---------------------------------
    def _time_reduction(self, ddp: Any, output: Any) -> None:
        """A forward that prepared a reduction (grad on, not under ``no_sync``): a hook on its output's
        gradient, which times the reduction at the end of that backward pass (over NCCL on a step
        whose collectives are timed)."""
        torch, comms = self.comms.torch, self.comms
        if not (torch.is_grad_enabled() and getattr(ddp, "require_backward_grad_sync", True)) or _compiling(torch):
            return
        tensor = _first_grad_tensor(output)
        if tensor is None:
            return
        group = getattr(ddp, "process_group", None)
        nccl = bool(getattr(tensor, "is_cuda", False)) and comms.to_nccl((group,), {})
        if nccl and not comms.timing:
            return
        reduction = Reduction(self.comms, ddp, tensor.device, nccl, id(group))
        try:
            tensor.register_hook(reduction.backward_reached)
        except Exception:  # noqa: BLE001, S110 - a tensor that takes no hook: this reduction untimed
            pass


class Reduction:
    """One backward pass's gradient reduction of a DDP model: its arrival and its end, from two
    callbacks at the end of the pass (the engine's queue, run in order: the first before DDP's own
    end-of-backward, the second, queued by the first, after it)."""

    def __init__(self, comms: Any, ddp: Any, device: Any, nccl: bool, group: int) -> None:
        self.comms, self.ddp, self.device, self.nccl, self.group = comms, ddp, device, nccl, group
        self.entered = 0.0
        self.arrival: Any = None

    def backward_reached(self, _grad: Any) -> None:
        """The hook on the DDP output's gradient (inside the backward pass): the arrival queued."""
        try:
            at_backward_end(self.comms.torch, self.arrived)
        except Exception:  # noqa: BLE001, S110 - an engine that takes no callback: untimed
            pass

    def arrived(self) -> None:
        """Every gradient computed and every bucket's all-reduce launched: the rank's arrival."""
        self.entered = time.monotonic()
        if self.nccl:
            self.arrival = self.comms.event_on(self.device)
            if self.arrival is None:
                return  # a CUDA graph's capture: the job's alone
        at_backward_end(self.comms.torch, self.ended)

    def ended(self) -> None:
        """DDP's end-of-backward has waited for the buckets' all-reduces: their end."""
        comms = self.comms
        if self.nccl:
            comms.stream_pair(self.entered, self.arrival, comms.event_on(self.device), self.group)
        else:
            comms.took(self.entered, time.monotonic())
        if comms.sizes is not None:  # a profiler window: the bytes its all-reduce kernels moved
            sizes = bucket_bytes(self.ddp)
            if sizes:
                comms.add_size("all-reduce", len(sizes), sum(sizes))


def _compiling(torch: Any) -> bool:
    """Under torch.compile's tracing: the job's alone."""
    return bool(getattr(getattr(torch, "compiler", None), "is_compiling", lambda: False)())


def at_backward_end(torch: Any, callback: Any) -> None:
    """``callback`` queued to run at the end of the backward pass under way (the engine's final
    callbacks, which DDP queues its own end-of-backward among)."""
    torch.autograd.Variable._execution_engine.queue_callback(callback)


def _first_grad_tensor(output: Any) -> Any:
    """The first tensor of a forward's output that the backward pass will reach (None: none)."""
    if isinstance(output, (list, tuple)):
        found = (_first_grad_tensor(o) for o in output)
    elif isinstance(output, dict):
        found = (_first_grad_tensor(o) for o in output.values())
    else:
        return output if getattr(output, "requires_grad", False) and getattr(output, "grad_fn", None) else None
    return next((t for t in found if t is not None), None)


def bucket_bytes(ddp: Any) -> list[int]:
    """A DDP model's gradient buckets' bytes, as its logger keeps them (its buckets as rebuilt after
    the first backward pass, else as first made); [] where it says none."""
    kept = getattr(ddp, "gpudash_bucket_bytes", None)
    if kept is not None:
        return list(kept)
    try:
        data = ddp._get_ddp_logging_data()
    except Exception:  # noqa: BLE001 - a DDP without its logger's data: not sized
        return []
    rebuilt = bool(data.get("has_rebuilt_buckets"))
    text = str(data.get("rebuilt_bucket_sizes" if rebuilt else "bucket_sizes") or "")
    sizes = [int(part) for part in text.replace(" ", "").split(",") if part.isdigit()]
    if rebuilt:
        ddp.gpudash_bucket_bytes = sizes  # they change no more
    return sizes


def sharded(optimizer: Any) -> str:
    """ "fsdp=2" where the optimizer steps sharded parameters (FSDP2's DTensors), else ""."""
    for group in optimizer.param_groups:
        for p in group["params"]:
            return "fsdp=2" if type(p).__name__ == "DTensor" else ""
    return ""
