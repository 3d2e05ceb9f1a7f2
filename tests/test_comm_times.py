"""A rank's wait in its collectives, as the job's hooks time it (``gpudash_boot.comm.CommTimes``):
the longest collective of the step, not their sum — DDP's buckets each wait for a slower rank while
the rank's own backward goes on beside them, and only the longest wait says how far behind the
other rank fell."""

from __future__ import annotations

import contextlib

import torch

from gpudash.boot.gpudash_boot import comm


def test_a_step_waits_as_long_as_its_longest_collective_not_their_sum() -> None:
    comms = comm.CommTimes(torch, contextlib.nullcontext)
    assert comms.at_step() is None  # no collective yet: not a distributed job
    for entered, completed in ((0.000, 0.005), (0.002, 0.007), (0.010, 0.019)):  # three buckets
        comms.took(entered, completed)
    assert abs((comms.at_step() or 0.0) - 9.0) < 1e-9  # the 9 ms bucket, not 19 ms (sum) nor 16 ms (union)
    assert comms.at_step() == 0.0  # a step with none: it waited for no one


def test_a_cpu_collective_still_running_at_the_step_counts_in_the_step_it_completes() -> None:
    comms = comm.CommTimes(torch, contextlib.nullcontext)
    entry = comm.Pending(1.000, object(), False)  # entered; its future not completed yet
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


class Clock:
    """The device's clock as the hooks see it: each event recorded reads the time it is set to."""

    def __init__(self) -> None:
        self.ms = 0.0
        self.recorded: list[FakeEvent] = []

    def record(self, _device: object) -> FakeEvent:
        self.recorded.append(FakeEvent(self.ms))
        return self.recorded[-1]


class FakeNcclWork:
    """An NCCL work asked async: its future completed at once (as NCCL's is), its callbacks run
    inline — or, ``done=False``, completed when the test says."""

    def __init__(self, done: bool = True) -> None:
        self.future: torch.futures.Future[None] = torch.futures.Future()
        if done:
            self.future.set_result(None)

    def get_future(self) -> torch.futures.Future[None]:
        return self.future

    def is_completed(self) -> bool:
        return True


def nccl_comms(clock: Clock) -> object:
    """CommTimes whose collectives go to NCCL and whose CUDA events read ``clock``."""

    class OnNccl(comm.CommTimes):
        def to_nccl(self, args: object, kwargs: object) -> bool:
            return True

        def event(self, args: object, kwargs: object) -> FakeEvent:
            return clock.record(None)

        def _record(self, device: object) -> FakeEvent:
            return clock.record(device)

    return OnNccl(torch, contextlib.nullcontext)


def test_an_nccl_call_that_waits_is_timed_on_its_stream_and_left_as_the_job_called_it() -> None:
    """A call without ``async_op`` stays one (no work made to time it): its time runs from the event
    at the call to the one after it on the calling stream, which waits for the collective — 30 ms
    where the other rank arrived 30 ms later."""
    clock, called = Clock(), []
    comms = nccl_comms(clock)

    def all_reduce(tensor: object, op: object = None, group: object = None, async_op: bool = False) -> None:
        called.append(async_op)
        clock.ms += 30.0  # the stream reaches the event after the call once the other rank is there

    timed = comms._timed(all_reduce)  # type: ignore[attr-defined]
    assert timed(SaysCuda(torch.ones(4))) is None
    assert called == [False]  # not made async
    assert comms.at_step() == 30.0  # type: ignore[attr-defined]


def test_a_fast_jobs_nccl_collectives_are_timed_over_a_step_at_most_every_tenth_of_a_second() -> None:
    """Each timed collective costs a DDP step two events and a callback (1.3 ms of a 30 ms ResNet-50
    step on 2 H200s): between timed steps the job's calls go straight through, and those steps read
    no figure (not a wait of 0) — the rank's own work is read from the steps that were timed."""
    clock, called = Clock(), []
    comms = nccl_comms(clock)

    def all_reduce(tensor: object, op: object = None, group: object = None, async_op: bool = False) -> None:
        called.append(async_op)
        clock.ms += 30.0

    timed = comms._timed(all_reduce)  # type: ignore[attr-defined]
    comms.every_s = 3600.0  # type: ignore[attr-defined]
    timed(SaysCuda(torch.ones(4)))
    assert comms.at_step() == 30.0 and len(clock.recorded) == 2  # type: ignore[attr-defined]
    timed(SaysCuda(torch.ones(4)))  # the next step, within the hour: not timed
    assert len(clock.recorded) == 2 and called == [False, False]
    comms.every_s = 0.0  # type: ignore[attr-defined]
    assert comms.at_step() is None  # type: ignore[attr-defined]
    timed(SaysCuda(torch.ones(4)))
    assert comms.at_step() == 30.0 and len(clock.recorded) == 4  # type: ignore[attr-defined]


def test_an_async_nccl_call_ends_at_the_event_its_futures_callback_records() -> None:
    clock = Clock()
    comms = nccl_comms(clock)
    work = FakeNcclWork(done=False)

    def all_gather_into_tensor(out: object, inp: object, async_op: bool = False) -> FakeNcclWork:
        return work

    got = comms._timed(all_gather_into_tensor)(SaysCuda(torch.ones(4)), SaysCuda(torch.ones(2)), async_op=True)  # type: ignore[attr-defined]
    assert got is work and len(clock.recorded) == 1  # the arrival; no end before its callback
    clock.ms += 12.5  # the callback's stream waits for the collective's kernels
    work.future.set_result(None)
    assert len(clock.recorded) == 2 and comms.at_step() == 12.5  # type: ignore[attr-defined]


def test_a_timed_step_whose_gpu_is_behind_reads_its_figure_once_all_its_collectives_completed() -> None:
    """The host runs ahead of the GPU: at the end of a timed step its last collectives have not
    ended yet. The step reads no figure then (not a wait of 0), and the next step — not timed —
    reads the timed step's, once its every collective is read: the one behind the late one in
    its group's order too."""
    comms = comm.CommTimes(torch, contextlib.nullcontext)
    comms.every_s = 3600.0
    late = FakeEvent(10.2, done=False)
    comms.stream_pair(0.0, FakeEvent(0.0), FakeEvent(0.1), 0)
    comms.stream_pair(0.0, FakeEvent(10.0), late, 0)
    comms.stream_pair(0.0, FakeEvent(10.1), FakeEvent(10.3), 0)  # queued behind it
    assert comms.at_step() is None and len(comms.open) == 2  # the group's order kept
    late.done = True
    assert abs((comms.at_step() or 0.0) - 0.2) < 1e-9  # from 10.1 to 10.3: its arrival to its end
    assert comms.at_step() is None  # a step between timed ones


def test_an_nccl_collective_without_an_end_event_is_said_untimed() -> None:
    """A work whose future gave no callback (a backend that completes it only at ``wait()``): once
    completed it counts as no wait, and the job's figures say that NCCL's collectives are not timed."""
    comms = comm.CommTimes(torch, contextlib.nullcontext)
    work = FakeNcclWork()
    comms.outstanding(comm.Pending(0.0, work, True, FakeEvent(0.0)))
    assert comms.at_step() == 0.0 and "not timed" in comms.untimed


def test_a_gloo_collective_on_a_step_between_timed_ones_gives_an_nccl_job_no_figure() -> None:
    """A job with NCCL collectives reads its figures from its timed steps alone: a gloo side
    group's all-reduce (or a barrier, timed by the host) on a step between them would stand for
    the step's whole wait, its NCCL collectives untimed there."""
    clock = Clock()
    comms = nccl_comms(clock)
    comms.every_s = 3600.0  # type: ignore[attr-defined]
    comms.stream_pair(0.0, FakeEvent(0.0), FakeEvent(30.0), 0)  # type: ignore[attr-defined]
    assert comms.at_step() == 30.0  # type: ignore[attr-defined]
    comms.took(1.0, 1.0002)  # type: ignore[attr-defined]  # 0.2 ms on the host, a step not timed
    assert comms.at_step() is None  # type: ignore[attr-defined]


def test_ddps_buffers_broadcast_and_buckets_go_through_the_hooks() -> None:
    """A DDP model with buffers (BatchNorm's) on gloo: its forward's broadcast of them, which DDP
    runs in C++, is timed (a figure after a forward alone), its arguments are read at its first
    forward, and its backward's buckets go through the reference hook gpudash gives it."""
    import torch.distributed as dist

    comms = comm.CommTimes(torch, contextlib.nullcontext)
    dist.init_process_group("gloo", rank=0, world_size=1, store=dist.HashStore())
    comms.install()
    try:
        model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4))
        ddp = torch.nn.parallel.DistributedDataParallel(model)
        assert comms.at_step() is None  # DDP's set-up is not a step's
        out = ddp(torch.randn(8, 4))
        assert comms.at_step() is not None and comms.settings["ddp_bucket_cap_mb"] == "25"
        comms.start_sizing()
        out.sum().backward()
        # its one bucket (the weights, bias and BatchNorm's affine parameters: 28 floats) through the hook
        assert comms.take_sizing().get("all-reduce") == [1, 28 * 4]
        assert comms.at_step() is not None  # the buckets' all-reduce, timed
    finally:
        comms.uninstall()
        dist.destroy_process_group()


def test_gpudash_leaves_nccls_own_timing_to_the_job() -> None:
    """NCCL's own timing cost a DDP ResNet-50 step 5% on 2 H200s: gpudash no longer sets it, and a
    job that sets it keeps its own setting."""
    from gpudash.job.launch import job_env

    assert "TORCH_NCCL_ENABLE_TIMING" not in job_env("channel", {"PATH": "/bin"})
    assert job_env("channel", {"TORCH_NCCL_ENABLE_TIMING": "1"})["TORCH_NCCL_ENABLE_TIMING"] == "1"


def test_a_gloo_collective_on_cuda_tensors_is_timed_by_the_hosts_clock() -> None:
    """Only NCCL's collectives are timed by CUDA events: gloo's on a CUDA tensor completes on the
    host, and no CUDA call is made to time it (here, where there is no CUDA, one would fail)."""
    import torch.distributed as dist

    comms = comm.CommTimes(torch, contextlib.nullcontext)
    dist.init_process_group("gloo", rank=0, world_size=1, store=dist.HashStore())
    comms.install()
    try:
        dist.all_reduce(torch.ones(8).as_subclass(SaysCuda))
        assert comms.at_step() is not None and comms.open == [] and comms.untimed == ""
    finally:
        comms.uninstall()
        dist.destroy_process_group()


def test_ddps_buffer_broadcast_is_timed_by_the_events_around_it() -> None:
    """The broadcast at each forward runs in C++ and the calling stream waits for it: the events on
    that stream before and after the call give the rank's wait for the lead rank there."""
    comms = comm.CommTimes(torch, contextlib.nullcontext)
    end = FakeEvent(24.0, done=False)
    comms.outstanding(comm.Pending(0.0, None, True, FakeEvent(0.0), end))
    assert comms.at_step() == 0.0
    end.done = True
    assert comms.at_step() == 24.0


def test_a_windows_collectives_are_sized_as_the_job_calls_them() -> None:
    """Over a profiler window the hooks count each kind's calls and bytes (the largest tensor of
    each call: an all-gather's output), which a GPU trace's kernels do not carry; outside a window,
    nothing is counted. A one-rank gloo group, in this process."""
    import torch.distributed as dist

    comms = comm.CommTimes(torch, contextlib.nullcontext)
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
    ``_IllegalWork`` whose ``wait()`` raises. The hooks once made a CUDA call async to time it and
    then waited: a job coalescing its all-reduces (Megatron's distributed optimizer does) died of it."""
    import torch.distributed as dist
    from torch.distributed.distributed_c10d import _coalescing_manager

    comms = comm.CommTimes(torch, contextlib.nullcontext)
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
