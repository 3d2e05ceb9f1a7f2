"""Data-parallel runs: N workload ranks under torchrun's launcher, reporting to one parent.

With ``RunConfig.nproc > 1`` the workload process (``gpudash.engine.child``) does not train itself: it
becomes torchrun's elastic agent (``torch.distributed.launcher.api.elastic_launch``, the launcher
and rendezvous ``torchrun`` runs), which starts ``nproc`` ranks on this node, watches them, and
ends them all when one fails. Multi-node runs pass ``--nnodes`` and ``--rdzv-endpoint`` through
to the same rendezvous (c10d); one node's run is ``torchrun --standalone``'s.

Each rank runs the ordinary step loop (``gpudash.engine.loop.StepLoop``) on its own device (cuda:LOCAL_RANK,
or the CPU with gloo), its workload built with DDP (``workloads.distributed``). The ranks stay
in lockstep on controls: every ``LOCKSTEP_EVERY`` steps each rank makes one broadcast from rank 0
over a gloo group (CPU tensors: no device sync), carrying the controls rank 0 read from the
parent's queue, so a change applies at the same step on every rank. Rank 0 reports to the parent
as a single process does (its samples count the global batch, N × the per-rank batch); the other
ranks send ``RankSample``s with their step times, which the parent folds into rank 0's samples
(slowest rank, its step time).

No process is left behind: the ranks (and their loader workers) stay in the workload process's
group, each rank ends that group the moment the launcher is gone (``gpudash.core.parent_watch.die_with_parent``),
as the launcher does when gpudash is gone; what the launcher writes to the temp dir (its log
directory, the ranks' error files) goes to the run's scratch directory, removed on every path.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
import time
import uuid
from collections import deque
from typing import TYPE_CHECKING, Any

from gpudash.core import procgroup
from gpudash.core.protocol import Control, Event, EventKind, Message, RankSample, RunConfig, Sample

if TYPE_CHECKING:  # pragma: no cover
    from workloads.distributed import RankInfo

LOCKSTEP_EVERY = 10  # steps between control broadcasts (one small gloo collective each), at most
LOCKSTEP_LATENCY_S = 0.5  # ... and fewer when steps are slow: a control waits about this long at most


def launch(config: RunConfig, controls: Any, out: Any, log_path: str | None, t0: float, scratch: str) -> None:
    """Start ``config.nproc`` ranks on this node with torchrun's launcher and wait for them.

    The launcher's files go under ``scratch`` (the run's scratch directory): its log directory,
    which it would otherwise make as ``torchelastic_*`` in the temp dir and never remove, and
    the error files ``torch.multiprocessing`` names in the temp dir (this process's temp dir is
    ``scratch`` from here on; the ranks' own stays the user's). Raises (torch's
    ``ChildFailedError``, one line per failed rank) when a rank fails; the launcher has then
    stopped the others."""
    from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    tempfile.tempdir = scratch  # the launcher process only: its environment's TMPDIR, the ranks', is unchanged

    endpoint = config.rdzv_endpoint or "localhost:0"
    launch_config = LaunchConfig(
        min_nodes=config.nnodes,
        max_nodes=config.nnodes,
        nproc_per_node=config.nproc,
        run_id=config.rdzv_id or str(uuid.uuid4()),
        rdzv_backend="c10d",
        rdzv_endpoint=endpoint,
        rdzv_configs={"timeout": 120} if config.nnodes > 1 else {},
        max_restarts=0,
        monitor_interval=0.1,
        start_method="spawn",
        logs_specs=DefaultLogsSpecs(log_dir=os.path.join(scratch, "torchelastic")),
    )
    elastic_launch(launch_config, rank_entry)(config, controls, out, log_path, t0, scratch)


def rank_main(config: RunConfig, controls: Any, out: Any, log_path: str | None, t0: float, scratch: str) -> None:
    """One rank: join the process group, build the workload with DDP, run the step loop."""
    from gpudash.core.parent_watch import die_with_parent, parent_pid

    die_with_parent(parent_pid(), scratch)  # the launcher leads the workload's group: its pid is the group's id

    import torch
    import torch.distributed as dist

    from gpudash.core import faults
    from gpudash.engine.builders import start_note, workload_builder
    from gpudash.engine.channel import ParentChannel
    from gpudash.engine.loop import StepLoop
    from workloads.distributed import RankInfo
    from workloads.knobs import parse_knobs

    info = RankInfo.from_env()
    device, control_group = _join_process_group(torch, dist, config.device, info)
    leader = ParentChannel(controls, out, t0=t0) if info.is_leader else None  # event times on the session's clock
    channel: Any = leader if leader is not None else FollowerChannel(out, info.rank)
    emit = channel.emit if leader is None else (lambda m: leader.emit(_as_global(m, info.world_size)))
    try:
        builder = workload_builder(config, device, info)
        first = builder(config.workload, config.variant, config.batch_size, parse_knobs(config.knobs))
        controls = LockstepControls(leader.next_control if leader else None, control_group, dist)
        loop = StepLoop(
            first,
            emit=emit,
            controls=controls,
            builder=builder,
            sample_interval_s=config.sample_interval_s,
            max_steps=config.max_steps,
            trace_dir=config.trace_dir if info.is_leader else None,
            t0=t0,
            lockstep_every=LOCKSTEP_EVERY,
            agree=lambda reason: _any_reason(dist, control_group, info.world_size, reason),
            fault=faults.for_workload(faults.from_env()),  # tests: each rank fails alike
            peak_tflops=config.peak_tflops,
        )
        started = f"{first.info.name} {first.variant}, batch {first.batch_size}"
        del first  # the loop alone holds it, so a switch of family frees it (gpudash.engine.child)
        controls.attach(loop)
        if leader is not None:
            note = start_note(torch, loop, device, nnodes=config.nnodes)
            message = f"{started} per rank on {info.world_size} ranks ({device.type}, DDP)"
            details, running = note.details(), loop.running()
            leader.emit(
                Event(loop.now(), EventKind.STARTED, message=message, details=details, running=running, data=note)
            )
        loop.run()
        loop.workload.close()
        if leader is not None:
            leader.emit(Event(time_s=loop.now(), kind=EventKind.STOPPED, running=loop.running()))
    finally:
        channel.close()
        if dist.is_initialized():
            dist.destroy_process_group()


def _join_process_group(torch: Any, dist: Any, device_name: str, info: RankInfo) -> tuple[Any, Any]:
    """Take this rank's device and join the run's process group; returns the device and the group
    the controls go over (gloo: on CUDA a group of its own, on the CPU the world)."""
    from workloads.base import available_cpus

    device = _rank_device(torch, device_name, info.local_rank)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    else:  # the node's CPUs shared between its ranks
        torch.set_num_threads(max(1, available_cpus() // max(1, info.local_world_size)))
    dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    control_group = dist.new_group(backend="gloo") if device.type == "cuda" else dist.group.WORLD
    return device, control_group


def _any_reason(dist: Any, group: Any, world_size: int, reason: str | None) -> str | None:
    """Every rank's refusal (None: none), gathered over the control group: the first there is."""
    reasons: list[str | None] = [None] * world_size
    dist.all_gather_object(reasons, reason, group=group)
    return next((r for r in reasons if r), None)


def _rank_device(torch: Any, name: str, local_rank: int) -> Any:
    """cuda:LOCAL_RANK for a CUDA run ("auto" with CUDA, "cuda"); the CPU otherwise."""
    if name == "cpu" or (name == "auto" and not torch.cuda.is_available()):
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise RuntimeError(f"--device {name} was asked for, but CUDA is not available here")
    count = torch.cuda.device_count()
    if local_rank >= count:
        raise RuntimeError(f"rank {local_rank} needs GPU {local_rank}, but this node has {count}")
    return torch.device("cuda", local_rank)


def _as_global(msg: Message, world_size: int) -> Message:
    """Rank 0's samples name the run's world size (the parent shows it)."""
    if isinstance(msg, Sample):
        return dataclasses.replace(msg, world_size=world_size)
    return msg


class LockstepControls:
    """The controls of a data-parallel run, the same on every rank at the same step.

    Called by each rank's step loop at the same points (``StepLoop(lockstep_every=…)``): when
    its buffer is empty it joins one broadcast from rank 0, which sends every control rank 0's
    queue holds (waiting up to ``timeout`` for the first); the buffer then hands them out one by
    one on every rank alike.

    Attached to its loop (``attach``), rank 0 also sends how many steps to take before the next
    look: about ``LOCKSTEP_LATENCY_S`` of steps at the rate since the last look, 1 to
    ``LOCKSTEP_EVERY``, so a Stop does not wait 10 slow steps; every rank sets it alike."""

    def __init__(self, local: Any, group: Any, dist: Any) -> None:
        self.local, self.group, self.dist = local, group, dist
        self._buffer: deque[Control] = deque()
        self._loop: Any = None
        self._last: tuple[float, int] | None = None  # rank 0: (time, steps issued) at the last look

    def attach(self, loop: Any) -> LockstepControls:
        self._loop = loop
        return self

    def _pace(self) -> int | None:
        """Rank 0: steps until the next look (None: unknown yet, keep the loop's)."""
        loop = self._loop
        if loop is None:
            return None
        now, issued = time.monotonic(), loop.steps_issued
        last, self._last = self._last, (now, issued)
        if last is None or issued <= last[1] or now <= last[0]:
            return None
        rate = (issued - last[1]) / (now - last[0])
        return max(1, min(LOCKSTEP_EVERY, round(rate * LOCKSTEP_LATENCY_S)))

    def __call__(self, timeout: float) -> Control | None:
        if not self._buffer:
            pending: list[Control] = []
            if self.local is not None:
                control = self.local(timeout)
                while control is not None:
                    pending.append(control)
                    control = self.local(0.0)
            box: list[Any] = [(pending, self._pace() if self.local is not None else None)]
            self.dist.broadcast_object_list(box, src=0, group=self.group)
            controls, every = box[0]
            self._buffer.extend(controls)
            if every is not None and self._loop is not None:
                self._loop.lockstep_every = every
        return self._buffer.popleft() if self._buffer else None


class FollowerChannel:
    """The output of a rank other than 0: its step times as ``RankSample``s, and its errors."""

    def __init__(self, out: Any, rank: int) -> None:
        self._out, self.rank = out, rank

    def emit(self, msg: Message) -> None:
        import queue

        if not isinstance(msg, Sample):
            return  # rank 0 reports the run's events (refusals are agreed by all ranks); a failing
            # rank's exception reaches the launcher through torch's error file (``rank_entry``)
        item = RankSample(
            time_s=msg.time_s, rank=self.rank, steps=msg.steps, steps_per_s=msg.steps_per_s, step_ms_p50=msg.step_ms_p50
        )
        try:
            self._out.put_nowait(item)
        except queue.Full:
            pass

    def close(self) -> None:
        self._out.close()


def describe_failure(exc: BaseException) -> str:
    """One line for a failed data-parallel run: which rank ended how, a rank killed by a signal
    first (the others then fail on their broken collectives), each exception's last line."""
    failures = getattr(exc, "failures", None)
    if not failures:
        return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    parts = []
    for rank, failure in sorted(failures.items(), key=lambda rf: (not _signal_name(rf[1]), rf[0])):
        signal_name = _signal_name(failure)
        if signal_name:
            parts.append(f"rank {rank} killed by {signal_name}")
            continue
        message = getattr(failure, "message", "")  # torch's error file: a dict with "message"
        why = str(message.get("message", "") if isinstance(message, dict) else message or "").strip().splitlines()
        detail = f" ({why[-1][:160]})" if why and why[-1] not in ("<N/A>", "") else ""
        parts.append(f"rank {rank} exited with code {getattr(failure, 'exitcode', None)}{detail}")
    return "data-parallel run failed: " + ", ".join(parts)


def _signal_name(failure: Any) -> str:
    """SIGKILL, ... when the rank died of a signal; "" when it exited."""
    return procgroup.signal_name(getattr(failure, "exitcode", None))


def rank_entry(config: RunConfig, controls: Any, out: Any, log_path: str | None, t0: float, scratch: str) -> None:
    """The ranks' entry point as torchrun's launcher runs it: ``rank_main`` under torch's ``record``,
    which writes a rank's exception to the error file the launcher reads, so the run's failure
    names it (a plain module-level function: the launcher pickles it for each spawned rank)."""
    from torch.distributed.elastic.multiprocessing.errors import record

    record(rank_main)(config, controls, out, log_path, t0, scratch)
