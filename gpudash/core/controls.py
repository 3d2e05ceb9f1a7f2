"""The controls: what the parent asks of the workload process, applied at its next step boundary.

Each is a small frozen record that crosses the process boundary (picklable). A change of the
running configuration (a ``ConfigChange``) is answered by a "changed" event, or by an "error" one
while the run goes on in its last good configuration; a measurement window (a ``StepWindow``), once
its ``steps`` are done, by a "measured" event (or an "error" one); ``Pause``, ``Resume`` and ``Stop``
by "paused", "resumed" and "stopped". Torch-free.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ConfigChange:
    """A change of the running configuration, named in the order a configuration is told:
    its workload, variant, batch size and knobs."""


@dataclass(frozen=True)
class SwitchWorkload(ConfigChange):
    workload: str
    variant: str | None = None
    batch_size: int | None = None


@dataclass(frozen=True)
class SetVariant(ConfigChange):
    variant: str


@dataclass(frozen=True)
class SetBatchSize(ConfigChange):
    batch_size: int


@dataclass(frozen=True)
class SetKnob(ConfigChange):
    """Set one knob (``workloads.knobs``) to a value; ``off`` turns it off."""

    name: str
    value: str


@dataclass(frozen=True)
class SetKnobs(ConfigChange):
    """Set every knob at once (one rebuild, one warm-up): the text form, ``none`` for all off."""

    knobs: str


@dataclass(frozen=True)
class Pause:
    pass


@dataclass(frozen=True)
class Resume:
    pass


@dataclass(frozen=True)
class Stop:
    pass


@dataclass(frozen=True)
class StepWindow:
    """A measurement over the next ``steps`` steps, begun at a step boundary (each kind its own
    number of steps by default)."""

    steps: int


@dataclass(frozen=True)
class MemoryPeak(StepWindow):
    """Record the CUDA allocator's history over ``steps`` steps: a ``measured`` event
    (what=MEMORY_PEAK) with the lines that held the peak (``gpudash.diagnosis.memory_peak``)."""

    steps: int = 2


@dataclass(frozen=True)
class TimeStages(StepWindow):
    """Time each stage of a two-stage workload alone (``steps`` times each), at a step boundary."""

    steps: int = 20


# a periodic window's steps (``--trace-every``): a few, so that its fixed costs — the profiler's start
# and stop, the trace's writing, each growing with the steps — stay small (docs/bench/h200x2-issue74b)
PERIODIC_STEPS = 5


@dataclass(frozen=True)
class TraceWindow(StepWindow):
    """Profile the next ``steps`` steps (torch.profiler, CPU + CUDA activities) at a step boundary:
    a Chrome trace in the run's trace directory and a ``measured`` event with its figures.
    ``host_ops`` False (periodic windows of a user's job on a GPU): the GPU's activity alone — the
    host's operators, recorded, slow a launch-bound step about 2× under the window."""

    steps: int = 20
    host_ops: bool = True


@dataclass(frozen=True)
class MeasureScaling(StepWindow):
    """In a data-parallel run: time rank 0 training alone for ``steps`` steps (the others wait) and
    report the scaling efficiency of the running configuration against it."""

    steps: int = 50


@dataclass(frozen=True)
class Diagnose(StepWindow):
    """A diagnosis window at a step boundary: ``steps`` steps timed (input wait, syncs) and, on a
    GPU, ``steps`` more under the profiler; a ``measured`` event (what="diagnosis") saying what
    bounds the configuration (``gpudash.diagnosis.rules``)."""

    steps: int = 30


@dataclass(frozen=True)
class LossEffect(StepWindow):
    """What the running knobs do to the loss: a plain fresh copy of the running configuration and
    the running configuration started as that copy (same weights, same batches; its compiled code
    kept), ``steps`` steps each; a ``measured`` event (what=LOSS_EFFECT) with both losses
    (``gpudash tune``'s correctness guard)."""

    steps: int = 50


Control = (
    SetBatchSize
    | SetVariant
    | SetKnob
    | SetKnobs
    | SwitchWorkload
    | Pause
    | Resume
    | Stop
    | TimeStages
    | TraceWindow
    | MeasureScaling
    | Diagnose
    | LossEffect
    | MemoryPeak
)
