"""Events: something changed, failed, started or was measured (``Event``), its ``EventKind``,
and the ``what`` names the events share between the workload process, the parent and the readers.

Torch-free: the child, the parent's runner and sampler, the recorder and the dashboard all use them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, ClassVar, Protocol

from gpudash.core.running import Running


class EventKind(str, Enum):
    """What an ``Event`` reports; the value is what the CSV's ``event_kind`` column holds."""

    STARTING = "starting"  # child process started, importing torch
    STARTED = "started"  # workload built, first configuration
    CHANGED = "changed"  # a control was applied: what/before/after say what
    ERROR = "error"  # a control (or step) failed; the run goes on in its last good configuration
    PAUSED = "paused"
    RESUMED = "resumed"
    STOPPED = "stopped"  # the child finished cleanly
    CRASHED = "crashed"  # the child died: message says why
    SUMMARY = "summary"  # written by the recorder: a configuration's statistics when it ends
    MEASURED = "measured"  # a one-off measurement (what="stages": stage times; what="trace": a
    # profiler window's figures, its file in details["trace_path"]): details hold the figures
    PROGRESS = "progress"  # a slow change under way ("compiling… 12 s"); what names the change
    # A user's job: a phase of its wall time other than training began (``after`` empty) or ended
    # (``after``: its seconds); ``what`` names it (``PHASES``)
    PHASE = "phase"
    STALLED = "stalled"  # a job with no step for long: where each of its threads waits (message)

    def __str__(self) -> str:
        return self.value


ENDING_KINDS = frozenset({EventKind.STOPPED, EventKind.CRASHED})  # the child is gone after these

# The ``what`` of "error" events about the run itself rather than a control:
NOT_RESPONDING = "watchdog"  # the parent heard nothing from the workload process for too long
SAMPLES_DROPPED = "samples"  # the workload process dropped samples while the parent read slowly
NVML_LOST = "nvml"  # NVML lost the GPU or the driver mid-run; telemetry stops, the run goes on
# The ``what`` of a Diagnose window's answer ("measured" with the verdict, or "error"):
DIAGNOSIS = "diagnosis"
LOSS_EFFECT = "loss_effect"  # the ``what`` of a LossEffect's answer
MEMORY_PEAK = "memory_peak"  # the ``what`` of a MemoryPeak's answer
# The phases of a job's wall time besides training (``EventKind.PHASE``'s ``what``), in the order
# they are told; and the ``what`` of the "measured" event with the run's seconds of each, and goodput
# (suspended: the job stopped by Ctrl-Z, kill -STOP, its terminal's SIGTTOU; profiling: gpudash's
# profiler windows starting and stopping between steps, and writing their traces — neither the job's own time)
STARTUP, EVALUATION, CHECKPOINT, COMPILE, TEARDOWN = "startup", "evaluation", "checkpoint", "compile", "teardown"
STALLED_PHASE, SUSPENDED, PROFILING, OTHER = "stalled", "suspended", "profiling", "other"
TRAINING = "training"
NOT_THE_JOBS = (SUSPENDED, PROFILING)  # phases left out of goodput's wall time
OPTIMIZER_STEPS = "optimizer steps"  # how a job's steps are counted when it steps torch.optim (the usual way)
PHASES = (STARTUP, TRAINING, EVALUATION, CHECKPOINT, COMPILE, STALLED_PHASE, SUSPENDED, TEARDOWN, PROFILING, OTHER)
GOODPUT = "phases"
TRACE = "trace"  # the ``what`` of a profiler window's events: its figures (measured), or why none came (error)
WINDOWS_PACED = "windows"  # the ``what`` of the measured note that periodic profiler windows are skipped for their cost
WORLD = "world"  # the ``what`` of the event saying which part of a torchrun run (its id, node, ranks) gpudash sees
PROCESSES = "processes"  # the ``what`` of the event saying how several processes' steps of a rank are counted
STEPS_COUNTED = "steps"  # the ``what`` of the event saying how a job's steps are counted (its optimizer's, …)
FLOPS = "flops"  # the ``what`` of the event saying what a model FLOPs count was, or why MFU is blank
OUT_OF_MEMORY = "out_of_memory"  # the ``what`` of the error event explaining a job's death of an OOM error
MEMORY = "memory"  # the ``what`` of the event saying what a job's memory holds by kind (``gpudash.job.memory``)
SHAPES = (
    "shapes"  # the ``what`` of the event saying a compiled job's steps at a new shape (``gpudash.job.shape_steps``)
)
# a "crashed" event's details[REFUSED] = "true": the first configuration was refused (a batch that
# would not fit, a bad setting for this machine): a usage error of the run, not a failure of it
REFUSED = "refused"
# details[TRACEBACK] = "log": the refusal came from the user's own code (``-w FILE.py:FUNCTION``),
# whose traceback the workload process printed to its log: the log is kept and named
TRACEBACK = "traceback"


class Payload(Protocol):
    """An event's typed data (a diagnosis' findings or judgement): a frozen dataclass that a
    recording keeps as JSON (``as_dict``) and reads back whole by its ``KIND`` (``recording.payloads``)."""

    KIND: ClassVar[str]

    def as_dict(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class Event:
    time_s: float
    kind: EventKind
    what: str = ""  # "variant", "batch_size", "workload", ... (for "changed" and "error")
    before: str = ""
    after: str = ""
    message: str = ""  # one line for the user
    # Extra facts, text only: "started" torch, cuda, device_name, gpu_uuid, pid; an event with a
    # configuration, its text form (filled in from ``running``).
    details: dict[str, str] = field(default_factory=dict, compare=False)
    # The configuration the event is about, typed; None: none (a job's phase, a drop report). Its
    # text form fills the details' configuration keys (what a person reads in the CSV).
    running: Running | None = field(default=None, compare=False)
    # What the event is about, typed (a diagnosis' ``Findings``, then its ``Judgement``); None: its text says all.
    data: Payload | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", EventKind(self.kind))  # text from a CSV: checked here
        if self.running is not None and not self.details.get("workload"):
            object.__setattr__(self, "details", {**self.details, **self.running.details()})

    @property
    def label(self) -> str:
        """A short label for a chart marker or a log line."""
        if self.kind == EventKind.CHANGED and self.what:
            return f"{self.what}: {self.before} → {self.after}"
        return self.message or self.kind.value
