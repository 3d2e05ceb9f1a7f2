"""A rank's wait in its collectives, as the job's hooks time it (``gpudash_job_comm.CommTimes``):
the longest collective of the step, not their sum — DDP's buckets each wait for a slower rank while
the rank's own backward goes on beside them, and only the longest wait says how far behind the
other rank fell."""

from __future__ import annotations

import contextlib

import torch

from tests.helpers import boot_module


def test_a_step_waits_as_long_as_its_longest_collective_not_their_sum() -> None:
    comms = boot_module("gpudash_job_comm").CommTimes(torch, contextlib.nullcontext)
    assert comms.at_step() is None  # no collective yet: not a distributed job
    for entered, completed in ((0.000, 0.005), (0.002, 0.007), (0.010, 0.019)):  # three buckets
        comms._interval(entered, completed)
    assert abs(comms.at_step() - 9.0) < 1e-9  # the 9 ms bucket, not 19 ms (sum) nor 16 ms (union)
    assert comms.at_step() == 0.0  # a step with none: it waited for no one


def test_a_cpu_collective_still_running_at_the_step_counts_in_the_step_it_completes() -> None:
    module = boot_module("gpudash_job_comm")
    comms = module.CommTimes(torch, contextlib.nullcontext)
    entry = module.Pending(1.000, object(), False)  # entered; its future not completed yet
    comms.open.append(entry)
    comms.seen = True
    assert comms.at_step() == 0.0 and comms.open == [entry]
    entry.completed = 1.012  # completed on the backend's thread
    assert abs((comms.at_step() or 0.0) - 12.0) < 1e-9 and comms.open == []


class FakeEvent:
    """A CUDA event at a time on the device's clock (ms), done or not: what the hooks read of one."""

    def __init__(self, at_ms: float, done: bool = True) -> None:
        self.at_ms, self.done = at_ms, done

    def query(self) -> bool:
        return self.done

    def elapsed_time(self, other: FakeEvent) -> float:
        return other.at_ms - self.at_ms


class FakeWork:
    """An NCCL work as torch times it: from when its process group's stream took it up to its end."""

    def __init__(self, started_ms: float, ended_ms: float, done: bool = True) -> None:
        self.started_ms, self.ended_ms, self.done = started_ms, ended_ms, done

    def is_completed(self) -> bool:
        return self.done

    def _get_duration(self) -> float:
        return self.ended_ms - self.started_ms


def test_nccl_buckets_queued_behind_each_other_read_the_wait_from_their_ranks_arrival() -> None:
    """A rank ahead of the other: its four buckets arrive at 0, 1, 2 and 3 ms, the other rank's at 25,
    29, 33 and 37 ms, and each takes 0.1 ms once both are there. NCCL's own timing of a later bucket
    starts when the stream is free of the one before, so it reads 4 ms for each; from the rank's
    arrival, the last bucket — the one that holds its step — waited 34.1 ms."""
    module = boot_module("gpudash_job_comm")
    comms = module.CommTimes(torch, contextlib.nullcontext)
    ends = [25.1, 29.1, 33.1, 37.1]  # the other rank's buckets come 4 ms apart from 25 ms on
    starts = [0.0, *ends[:-1]]  # each taken up once the one before has ended
    for i, (start, end) in enumerate(zip(starts, ends, strict=True)):
        comms._entered(module.Pending(0.0, FakeWork(start, end), True, FakeEvent(1.0 * i)))
    assert abs(max(e - s for s, e in zip(starts, ends, strict=True)) - 25.1) < 1e-9  # NCCL's own figures alone
    assert abs((comms.at_step() or 0.0) - 34.1) < 1e-9


def test_the_rank_the_others_wait_for_reads_only_the_transfer_and_a_late_one_waits_its_turn() -> None:
    module = boot_module("gpudash_job_comm")
    comms = module.CommTimes(torch, contextlib.nullcontext)
    late = FakeWork(10.0, 10.2, done=False)
    comms._entered(module.Pending(0.0, FakeWork(0.0, 0.1), True, FakeEvent(0.0)))
    comms._entered(module.Pending(0.0, late, True, FakeEvent(10.0)))
    comms._entered(module.Pending(0.0, FakeWork(10.2, 10.3), True, FakeEvent(10.1)))  # queued behind it
    assert abs((comms.at_step() or 0.0) - 0.1) < 1e-9 and len(comms.open) == 2  # the group's order kept
    late.done = True
    assert abs((comms.at_step() or 0.0) - 0.2) < 1e-9  # 10.1 → 10.3: 0.1 left of the one before, its own 0.1


def test_ddps_buffer_broadcast_is_timed_by_the_events_around_it() -> None:
    """The broadcast at each forward runs in C++ and the calling stream waits for it: the events on
    that stream before and after the call give the rank's wait for the lead rank there."""
    module = boot_module("gpudash_job_comm")
    comms = module.CommTimes(torch, contextlib.nullcontext)
    end = FakeEvent(24.0, done=False)
    comms._entered(module.Pending(0.0, None, True, FakeEvent(0.0), end))
    assert comms.at_step() == 0.0
    end.done = True
    assert comms.at_step() == 24.0


def test_a_windows_collectives_are_sized_as_the_job_calls_them() -> None:
    """Over a profiler window the hooks count each kind's calls and bytes (the largest tensor of
    each call: an all-gather's output), which a GPU trace's kernels do not carry; outside a window,
    nothing is counted. A one-rank gloo group, in this process."""
    import torch.distributed as dist

    module = boot_module("gpudash_job_comm")
    comms = module.CommTimes(torch, contextlib.nullcontext)
    dist.init_process_group("gloo", rank=0, world_size=1, store=dist.HashStore())
    comms.install()
    try:
        grads = torch.ones(1000)  # 4,000 bytes
        dist.all_reduce(grads)
        comms.start_sizing()
        dist.all_reduce(grads)
        dist.all_reduce(torch.ones(10, dtype=torch.float64))  # 80 bytes
        dist.all_gather_into_tensor(torch.empty(1000), torch.ones(1000))
        dist.all_reduce_coalesced([torch.ones(10), torch.ones(20)])  # a list's tensors together: 120 bytes
        assert comms.take_sizing() == {"all-reduce": [3, 4200], "all-gather": [1, 4000]}
        dist.all_reduce(grads)
        assert comms.take_sizing() == {}  # sizing ended with the window
    finally:
        comms.uninstall()
        dist.destroy_process_group()


class SaysCuda(torch.Tensor):
    """A CPU tensor that says it is on a GPU: the hooks' CUDA path, on the CPU."""

    @property
    def is_cuda(self) -> bool:  # type: ignore[override]
        return True


def test_a_collective_inside_the_coalescing_manager_is_left_to_the_job() -> None:
    """Inside ``_coalescing_manager`` a call only queues a collective; asked async it returns an
    ``_IllegalWork`` whose ``wait()`` raises. The hooks make a CUDA call async to time it and then
    wait: a job coalescing its all-reduces (Megatron's distributed optimizer does) died of it."""
    import torch.distributed as dist
    from torch.distributed.distributed_c10d import _coalescing_manager

    comms = boot_module("gpudash_job_comm").CommTimes(torch, contextlib.nullcontext)
    dist.init_process_group("gloo", rank=0, world_size=1, store=dist.HashStore())
    comms.install()
    try:
        grads = torch.ones(8).as_subclass(SaysCuda)
        with _coalescing_manager(async_ops=True) as coalesced:
            assert dist.all_reduce(grads) is None  # queued, as the job asked: no error
        coalesced.wait()
    finally:
        comms.uninstall()
        dist.destroy_process_group()
