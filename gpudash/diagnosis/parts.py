"""A step's parts, ms of the untraced step, from one diagnosis window's evidence: the limits a fix
removes (``INPUT`` … ``COMM``), the parts the remedies weigh (``Parts``) and those the
communication-bound rule weighs (``weighed_parts``).

Each part comes without the profiler's slowdown: the untraced step's wall time and its wait for the
next batch; the GPU's busy time a step (kernels run at their speed under the profiler); the host's
own time a step, its step marker less the calls in which it waited for the GPU (a sync), scaled by
the untraced step over the traced one (the profiler slows the host); the collectives' exposed time
(the traced steps' share of the step, so never more than it). For the remedies a step is its input
wait plus the longer of the host's and the GPU's work, a sync adding the GPU's time to the host's.

The rule's parts differ from the remedies' in three ways, each its own judgement of the window:
the GPU's part is its busy share of the untraced step less the exposed collectives (``Parts.gpu``:
its busy time a traced step, collectives' kernels included); the host's part is left out where
launched work queues (the host runs ahead: its time is not the step's) and is scaled by the untraced
step over the traced one either way (``Parts.host``: only slowed down, and never more than the step
less its input wait); the collectives' part is at most the step. Torch-free.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from gpudash.diagnosis.evidence import Evidence

SHOWN_FROM = 1.05  # a remedy worth less than this is not named
INPUT, SYNCS, HOST, GPU, COMM = "input", "syncs", "host", "gpu", "all-reduce"  # the limits a fix removes


def host_own_ms(e: Evidence) -> float | None:
    """The host's own work a traced step: its step marker less its waits for the GPU (None: not traced)."""
    if e.host_ms_per_step is None:
        return None
    return max(0.0, e.host_ms_per_step - (e.host_wait_ms or 0.0))


def weighed_parts(e: Evidence) -> dict[str, float]:
    """The parts the communication-bound rule weighs, ms of the untraced step: the input wait, the
    host's own work where launched work does not queue, the GPU's computation, the exposed collectives."""
    parts = {INPUT: e.input_ms}
    traced = e.traced_step_ms or e.step_ms
    if (own := host_own_ms(e)) is not None and traced > 0 and not e.queued:
        parts[HOST] = own / traced * e.step_ms
    comm = min(e.comm_exposed_ms or 0.0, e.step_ms)
    if e.gpu_busy_pct is not None:
        parts[GPU] = max(0.0, e.gpu_busy_pct / 100.0 * e.step_ms - comm)  # its busy time less the collectives'
    return {**parts, COMM: comm} if e.comm_exposed_ms is not None else parts


@dataclass(frozen=True)
class Parts:
    """A step's measured parts, ms, without the profiler's slowdown (None: not measured here)."""

    step: float
    input: float
    host: float | None  # the host's own work a step, its waits for the GPU left out
    gpu: float | None  # the GPU's busy time a step
    comm: float | None  # the collectives' exposed time a step (the traced steps' share of this step)
    syncs: bool  # the host waits for the GPU inside the step

    @classmethod
    def of(cls, e: Evidence) -> Parts:
        loop = max(e.step_ms - e.input_ms, 0.0)
        host: float | None = None
        if (own := host_own_ms(e)) is not None:
            slowed = e.traced_step_ms / e.step_ms if e.traced_step_ms and e.step_ms > 0 else 1.0
            host = min(own / max(1.0, slowed), loop)
        elif e.gpu_ms_per_step is None:  # the CPU: the step's own work is the host's
            host = loop
        syncs = bool(e.syncs_per_step) and (e.host_wait_ms is None or e.host_wait_ms > 0)
        return cls(e.step_ms, e.input_ms, host, e.gpu_ms_per_step, e.comm_exposed_ms, syncs)

    def without(self, limit: str) -> Parts | None:
        """The step with ``limit``'s part gone; None where it was not measured or is not a part."""
        loop = self.step - self.input
        if limit == INPUT and self.input > 0:
            return dataclasses.replace(self, step=loop, input=0.0)
        if limit == COMM and self.comm:
            return dataclasses.replace(self, step=self.step - self.comm, comm=0.0)
        if self.host is None or self.gpu is None:
            return None
        if limit == SYNCS and self.syncs:
            return dataclasses.replace(self, step=self.input + max(self.host, self.gpu), syncs=False)
        if limit == HOST and self.host > self.gpu and not self.syncs:  # a step that syncs cannot be one graph
            return dataclasses.replace(self, step=self.input + self.gpu, host=self.gpu)
        if limit == GPU and self.gpu > self.host:  # the GPU is the longer of the two
            return dataclasses.replace(self, step=self.input + self.host, gpu=self.host)
        return None

    def worth(self, limit: str) -> tuple[float, Parts] | None:
        """How many times faster the step is without ``limit``'s part, and the step then."""
        after = self.without(limit)
        if after is None or after.step <= 0 or self.step / after.step < SHOWN_FROM:
            return None
        return self.step / after.step, after
