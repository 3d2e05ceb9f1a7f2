"""A step's parts, ms of the untraced step, from one diagnosis window's evidence — one model for the
verdict (``Parts.weighed``: the parts the rules weigh) and for the remedies (``Parts.worth``: how
much faster the step is with one part gone), with the limits a fix removes (``INPUT`` … ``WAIT``).

Each part comes without the profiler's slowdown: the untraced step's wall time and its wait for the
next batch; the host's own time a step — its step marker less the calls in which it waited for the
GPU (a sync), scaled down by the traced step over the untraced one (the profiler slows the host),
never more than the step less its input wait; the GPU's computation, its busy time a traced step
(kernels run at their speed under the profiler; its busy share of the untraced step where that
time is not known) less the exposed collectives; the collectives'
exposed *transfer* — where the ranks' windows were matched (``gpudash.engine.comm_split``), the
part of the data's movement no computation hid, and beside it the exposed *wait* for the rank that
arrived last — never more than the untraced steps' longest collective from the rank's arrival (a
profiler window slows the ranks unevenly and pulls them apart: its wait is the window's, not the
job's); where they were not (one rank's window), the collectives' exposed time, all of it. Where
the ranks' untraced own work names a straggler (``gpudash.ranks.own_work``), the wait is this
rank's untraced wait for it — measured where it happens, on the GPU's stream with NCCL, on the
host with gloo — not a window's. Without GPU figures the step's own work is the host's, apart
from its wait and, on the CPU, its collectives (the untraced longest, from this rank's arrival:
gloo's run on the host; a GPU job that ended before its window has NCCL's, which overlap the
backward pass, and no collectives' part). Where the GPU ran 90% or more of the untraced step
(``gpu_busy_untraced``), the host's part is not taken longer than the GPU's: a window that slowed
the host says nothing of its untraced time beyond the step.

The step is its input wait plus the longer of the host's work and the GPU's (computation and
exposed collectives), a sync adding the GPU's time to the host's. The verdict leaves out the
host's part where launched work queues (the host runs ahead: its time is not the step's).
Torch-free.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from gpudash.diagnosis.evidence import Evidence

SHOWN_FROM = 1.05  # a remedy worth less than this is not named
GPU_BUSY = 90.0  # % of the (untraced) step the GPU ran anything: GPU-bound at or above
DISTORTED_FROM = 1.05  # a window's steps this many times slower than untraced ones: weighed against them
INPUT, SYNCS, HOST, GPU = "input", "syncs", "host", "gpu"  # the limits a fix removes ...
COMM, WAIT = "communication", "waiting"  # ... the collectives' transfer, and the wait for the last rank


def host_own_ms(e: Evidence) -> float | None:
    """The host's own work a traced step: its step marker less its waits for the GPU (None: not traced)."""
    if e.host_ms_per_step is None:
        return None
    return max(0.0, e.host_ms_per_step - (e.host_wait_ms or 0.0))


OUTSIDE_SHARE = 0.5  # of the host's own work outside torch (stretches of 1 ms or more): the script's, not launching
OUTSIDE_NOTED = 0.25  # ... said beside a launching verdict from this share (DDP steps that sleep not read 6-7 ms)


def outside_torch_ms(e: Evidence, host: float | None, less: float = 0.0) -> float | None:
    """Of the host's own work a step (``host``, untraced), the time outside torch in stretches of a
    millisecond or more (a sleep, a read, the script's Python: ``Evidence.host_gaps_ms``) less the
    wait for the next batch (a step's marker holds it: the loader's queue is outside torch too) and
    ``less`` (on the CPU, the collectives: a gloo wait is no operator), never more than that work;
    None where not measured."""
    if e.host_gaps_ms is None or host is None:
        return None
    return min(max(0.0, e.host_gaps_ms - e.input_ms - less), host)


@dataclass(frozen=True)
class Parts:
    """A step's measured parts, ms, without the profiler's slowdown (None: not measured here)."""

    step: float
    input: float
    host: float | None  # the host's own work a step, its waits for the GPU left out
    gpu: float | None  # the GPU's computation a step: its busy time less the exposed collectives
    comm: float | None  # the collectives' exposed transfer a step (their exposed time where not matched)
    wait: float | None  # of the exposed collectives, the wait for the rank that arrives last (None: not measured)
    syncs: bool  # the host waits for the GPU inside the step
    queued: bool = False  # launched work waits in the GPU's queue: the host runs ahead

    @classmethod
    def of(cls, e: Evidence) -> Parts:
        loop = max(e.step_ms - e.input_ms, 0.0)
        comm, wait = _collectives(e)
        host: float | None = None
        if (own := host_own_ms(e)) is not None:
            slowed = e.window_slowdown
            host = min(own / max(1.0, slowed), loop)
        elif e.gpu_ms_per_step is None:  # no GPU figures: the step's own work, its collectives left out
            host = max(0.0, loop - (comm or 0.0) - (wait or 0.0))
        busy = e.gpu_ms_per_step
        if busy is None and e.gpu_busy_pct is not None:  # the busy share alone: of the untraced step
            busy = e.gpu_busy_pct / 100.0 * e.step_ms
        room = loop - (comm or 0.0) - (wait or 0.0)  # the untraced step's, its collectives apart
        gpu = None if busy is None else max(0.0, min(busy - (comm or 0.0) - _spun(e, wait), room))
        if host is not None and gpu is not None and (gpu_busy_untraced(e) or 0.0) >= GPU_BUSY:
            host = min(host, gpu + (comm or 0.0) + (wait or 0.0))  # a window that slowed the host: not longer
        syncs = bool(e.syncs_per_step) and (e.host_wait_ms is None or e.host_wait_ms > 0)
        return cls(e.step_ms, e.input_ms, host, gpu, comm, wait, syncs, e.queued)

    @property
    def collectives(self) -> float:
        """The exposed collectives a step: transfer and wait."""
        return (self.comm or 0.0) + (self.wait or 0.0)

    def weighed(self) -> dict[str, float]:
        """The parts the verdict weighs: the input wait, the host's own work where launched work does
        not queue (without GPU figures, the step's own work), the GPU's computation, the exposed
        transfer and the exposed wait."""
        parts = {INPUT: self.input}
        if self.host is not None and not self.queued:
            parts[HOST] = self.host
        if self.gpu is not None:
            parts[GPU] = self.gpu
        if self.comm is not None:
            parts[COMM] = self.comm
        if self.wait is not None:
            parts[WAIT] = self.wait
        return parts

    def without(self, limit: str) -> Parts | None:
        """The step with ``limit``'s part gone; None where it was not measured or is not a part."""
        loop = self.step - self.input
        if limit == INPUT and self.input > 0:
            return dataclasses.replace(self, step=loop, input=0.0)
        if limit == COMM and self.comm:
            return dataclasses.replace(self, step=self.step - self.comm, comm=0.0)
        if limit == WAIT and self.wait:
            return dataclasses.replace(self, step=self.step - self.wait, wait=0.0)
        if self.host is None or self.gpu is None:
            return None
        gpu = self.gpu + self.collectives  # the GPU's time a step, its collectives' included
        if limit == SYNCS and self.syncs:
            return dataclasses.replace(self, step=self.input + max(self.host, gpu), syncs=False)
        if limit == HOST and self.host > gpu and not self.syncs:  # a step that syncs cannot be one graph
            return dataclasses.replace(self, step=self.input + gpu, host=gpu)
        if limit == GPU and gpu > self.host:  # the GPU is the longer of the two
            after = max(self.host, self.collectives)
            return dataclasses.replace(self, step=self.input + after, gpu=max(0.0, after - self.collectives))
        return None

    def worth(self, limit: str) -> tuple[float, Parts] | None:
        """How many times faster the step is without ``limit``'s part, and the step then."""
        after = self.without(limit)
        if after is None or after.step <= 0 or self.step / after.step < SHOWN_FROM:
            return None
        return self.step / after.step, after


def _collectives(e: Evidence) -> tuple[float | None, float | None]:
    """The collectives' exposed transfer and the wait for the last rank, ms a step (None: not
    measured). The wait is the untraced one where the ranks' own work names a straggler
    (``Evidence.straggler_wait_ms``: a profiler window pulls the ranks apart), else the matched
    windows' — never more than the untraced steps' longest collective. On the CPU the transfer is
    the untraced steps' longest collective from this rank's arrival, less that wait: gloo's run on
    the host, and their time is the step's (an upper bound where DDP's buckets overlap the backward
    pass; the one-rank check bounds it). A GPU job without its window has none: NCCL's overlap it."""
    matched = e.comm_transfer_exposed_ms is not None
    comm = e.comm_transfer_exposed_ms if matched else e.comm_exposed_ms
    wait = min(e.comm_wait_ms or 0.0, e.step_ms) if matched else None
    if wait is not None and e.comm_longest_ms is not None:  # never more than the untraced steps waited
        wait = min(wait, e.comm_longest_ms)
    if e.straggler_wait_ms is not None:
        if comm is not None and not matched:  # one rank's window: its exposed time holds the wait too
            comm = max(0.0, comm - e.straggler_wait_ms)
        wait = min(e.straggler_wait_ms, e.step_ms)
    if comm is None and e.on_cpu and e.comm_longest_ms is not None:  # (NCCL's overlap the backward pass)
        comm = max(0.0, e.comm_longest_ms - (wait or 0.0))
    return (None if comm is None else min(comm, e.step_ms)), wait


def _spun(e: Evidence, wait: float | None) -> float:
    """Of the window's GPU busy time a step, its collectives' wait for another rank (NCCL's kernels
    spinning), which is no computation: the matched windows' own wait — all of it, whatever the
    wait weighed (a straggler's untraced one) — or, in one rank's window, the part of its exposed
    time that ``_collectives`` took out of the transfer as the untraced wait."""
    if e.comm_transfer_exposed_ms is not None:
        return min(e.comm_wait_ms or 0.0, e.step_ms)
    if e.straggler_wait_ms is not None and e.comm_exposed_ms is not None:
        return min(e.comm_exposed_ms, e.straggler_wait_ms)
    return wait or 0.0


def gpu_busy_untraced(e: Evidence) -> float | None:
    """The GPU's busy share of the *untraced* step, %, without its collectives' exposed wait for
    another rank (matched across the ranks' windows: ms a traced step). Kernels run at their speed
    under the profiler while it slows the host: where the window's steps ran ``DISTORTED_FROM``
    times slower or more (or a matched wait is taken out), the GPU's busy time a step over the
    untraced step — on 2 H200s an even DDP job's window ran its steps 1.68× slower, the GPU busy
    55% of them and 29.5 ms a step, 93% of its 31.8 ms untraced step (it was called
    host/launch-bound). Else, and where the kernels' time a step is longer than the untraced step
    (tiny kernels the profiler slows: an encoder-decoder's 3.7 ms against 3 ms), the window's own
    share less the wait. A window pulls the ranks apart too: an even job's window spun 10.1 ms a
    step where its untraced steps waited 0.55, and its busy share less the wait fell under
    GPU-bound's threshold."""
    if e.gpu_busy_pct is None:
        return None
    wait = e.comm_wait_ms or 0.0
    slowed = e.window_slowdown
    work = None if e.gpu_ms_per_step is None else e.gpu_ms_per_step - wait  # the window's spin all out
    if work is not None and 0 < work <= e.step_ms and (slowed >= DISTORTED_FROM or wait):
        return max(0.0, 100.0 * work / e.step_ms)
    if not wait or not e.traced_step_ms:
        return e.gpu_busy_pct
    return max(0.0, e.gpu_busy_pct - 100.0 * min(wait, e.traced_step_ms) / e.traced_step_ms)
