"""Small picklable messages that cross the process boundary, and the interface listeners use.

Never imports torch or textual: the CLI, the recorder and the TUI all import this.

Data flow: the parent sends *controls* to the workload child; the child sends back
*samples* (a few per second) and *events* (something changed, failed or started). The
parent's NVML thread produces *GPU samples*. Listeners (the recorder, the TUI) see all
three through an ``EngineSource``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from enum import Enum, IntEnum
from typing import Protocol

from gpudash.core.running import Running
from gpudash.core.sync_sites import SyncTable

JOB_PREFIX = "job:"  # the workload name of a user's own job (``gpudash -- CMD``): "job:" and its script


class ExitCode(IntEnum):
    """The exit status of every ``gpudash`` command."""

    OK = 0
    FAILED = 1  # the workload (or writing the recording) failed
    USAGE = 2  # bad arguments or an unreadable file
    INTERRUPTED = 130  # SIGINT or SIGTERM


@dataclass(frozen=True)
class RunConfig:
    """Everything needed to start a run; ``None`` means the family's default for the device."""

    workload: str = "encdec"
    variant: str | None = None
    batch_size: int | None = None
    device: str = "auto"  # "auto" (cuda if available, else cpu), "cpu", "cuda", "cuda:N"
    image_size: int | None = None
    workers: int | None = None
    seed: int = 0
    sample_interval_s: float = 0.25  # how often the child sends a Sample
    gpu_interval_s: float = 0.5  # NVML tick
    max_steps: int | None = None  # the child stops by itself after this many steps (None: never)
    sync_sites: bool = True  # each host-device sync in the steps attributed to its line (CUDA; gpudash.core.sync_sites)
    knobs: str = "none"  # knob settings in their text form ("amp=bf16,cuda_graph=on"; workloads.knobs)
    trace_dir: str | None = None  # where profiler windows write their traces (None: no windows)
    # a started workload that sends nothing (no sample, no event) for this long is reported as
    # "not responding" (the watchdog in gpudash.host.runner); None: never
    watchdog_s: float | None = 60.0
    # Data parallelism (gpudash.engine.ranks): ranks on this node, nodes, and the rendezvous of a multi-node run
    nproc: int = 1
    nnodes: int = 1
    rdzv_endpoint: str | None = None
    rdzv_id: str | None = None
    # the NVML indexes of the GPUs to watch, one row and CSV columns each, in this order
    # (``--gpus 0,2``); None: the ones CUDA_VISIBLE_DEVICES names, else every GPU of the machine
    gpus: tuple[int, ...] | None = None
    # the user's own job, run unmodified (``gpudash -- CMD``): its command line; the workload is
    # then ``job:`` and its script (gpudash.job.command), and none of the family's settings apply
    job: tuple[str, ...] | None = None
    # the GPU's dense peak in TFLOP/s that MFU is a share of (``--peak-tflops``); None: the table's
    # figure for the GPU and the step's dtype (gpudash.core.peaks)
    peak_tflops: float | None = None
    # a user's job with no step for this long (and ten of its median steps), in no phase the hooks
    # time, is stalled: gpudash asks where each of its threads waits (``gpudash.job.stalls``)
    stall_after_s: float = 30.0
    # a user's job: settings applied from outside (``--set``; gpudash.job.settings), (key, value) pairs
    job_set: tuple[tuple[str, str], ...] = ()


# -- controls: parent -> child, applied at a step boundary ---------------------------------
@dataclass(frozen=True)
class SetBatchSize:
    batch_size: int


@dataclass(frozen=True)
class SetVariant:
    variant: str


@dataclass(frozen=True)
class SetKnob:
    """Set one knob (``workloads.knobs``) to a value; ``off`` turns it off."""

    name: str
    value: str


@dataclass(frozen=True)
class SetKnobs:
    """Set every knob at once (one rebuild, one warm-up): the text form, ``none`` for all off."""

    knobs: str


@dataclass(frozen=True)
class SwitchWorkload:
    workload: str
    variant: str | None = None
    batch_size: int | None = None


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
class MemoryPeak:
    """Record the CUDA allocator's history over ``steps`` steps: a ``measured`` event
    (what=MEMORY_PEAK) with the lines that held the peak (``gpudash.diagnosis.memory_peak``)."""

    steps: int = 2


@dataclass(frozen=True)
class TimeStages:
    """Time each stage of a two-stage workload alone (``steps`` times each), at a step boundary."""

    steps: int = 20


@dataclass(frozen=True)
class TraceWindow:
    """Profile the next ``steps`` steps (torch.profiler, CPU + CUDA activities) at a step boundary:
    a Chrome trace in the run's trace directory and a ``measured`` event with its figures."""

    steps: int = 20


@dataclass(frozen=True)
class MeasureScaling:
    """In a data-parallel run: time rank 0 training alone for ``steps`` steps (the others wait) and
    report the scaling efficiency of the running configuration against it."""

    steps: int = 50


@dataclass(frozen=True)
class Diagnose:
    """A diagnosis window at a step boundary: ``steps`` steps timed (input wait, syncs) and, on a
    GPU, ``steps`` more under the profiler; a ``measured`` event (what="diagnosis") saying what
    bounds the configuration (``gpudash.diagnosis.rules``)."""

    steps: int = 30


@dataclass(frozen=True)
class LossEffect:
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


# -- child -> parent ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Sample:
    """Throughput over the interval since the previous sample (time in seconds since run start)."""

    time_s: float
    workload: str
    variant: str
    batch_size: int
    steps: int  # total steps done in this run
    samples: int  # total samples trained in this run
    interval_s: float
    steps_per_s: float
    samples_per_s: float | None  # None: the batch size is not known (a job without a DataLoader)
    step_ms_p50: float | None
    step_ms_p95: float | None
    syncs_per_step: float | None  # host-device syncs per step; None where not countable (CPU)
    loss: float | None = None
    knobs: str = "none"  # the knob settings this sample ran with (text form)
    # A data-parallel run: its ranks (samples count the global batch), and the slowest rank's
    # step time (p50) in the latest reports of the other ranks (filled in by the parent's runner)
    world_size: int = 1
    slowest_rank: int | None = None
    slowest_rank_step_ms: float | None = None
    # What the workload's CUDA caching allocator holds on its device (None on the CPU)
    cuda_allocated_mib: float | None = None
    cuda_reserved_mib: float | None = None
    # What made the machine noisy while this sample was measured ("": quiet); stamped by the
    # parent (``gpudash.host.noise``), never by the child
    noise: str = ""
    # The model FLOPs of one step on one GPU (counted once per configuration, eagerly:
    # ``gpudash.engine.flops``), the rate they make and its share of the GPU's dense peak
    # (``gpudash.core.peaks``); None: not known (the reason went out once, as a "measured" event)
    flops_per_step: float | None = None
    tflops: float | None = None
    mfu_pct: float | None = None
    # A user's job (``gpudash.job.steps``): the seconds of training steps its rates are over, which
    # the statistics weigh them by (evaluation, checkpoints, stalls and a step still under way
    # left out; 0: nothing to count); None: the whole interval, as a family's steps fill it
    train_s: float | None = None
    # A user's job (``gpudash.job.memory``): what its memory holds by kind, as last counted, MiB
    mem_params_mib: float | None = None
    mem_grads_mib: float | None = None
    mem_optimizer_mib: float | None = None
    mem_activations_mib: float | None = None
    mem_peak_mib: float | None = None
    mem_rss_mib: float | None = None


@dataclass(frozen=True)
class RankSample:
    """One rank of a data-parallel run over a window: its own step times (the CSV's ``rank`` rows).
    ``rank`` is the global rank; the other fields are None where unknown."""

    time_s: float
    rank: int
    steps: int
    steps_per_s: float
    step_ms_p50: float | None
    node: int | None = None  # the node (torchrun's GROUP_RANK) the rank runs on
    samples_per_s: float | None = None  # the rank's own samples a second
    input_wait_pct: float | None = None  # share of its training time spent waiting for input
    allreduce_exposed_ms: float | None = None  # its latest profiler window's exposed all-reduce a step
    own_ms: float | None = None  # its step less the time a collective of its was outstanding (median)
    comm_ms: float | None = None  # ... and that time (median, ms a step)


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
# (suspended: the job stopped by Ctrl-Z, kill -STOP, its terminal's SIGTTOU: not its own time)
STARTUP, EVALUATION, CHECKPOINT, COMPILE, TEARDOWN = "startup", "evaluation", "checkpoint", "compile", "teardown"
STALLED_PHASE, SUSPENDED, OTHER = "stalled", "suspended", "other"
TRAINING = "training"
PHASES = (STARTUP, TRAINING, EVALUATION, CHECKPOINT, COMPILE, STALLED_PHASE, SUSPENDED, TEARDOWN, OTHER)
GOODPUT = "phases"
WORLD = "world"  # the ``what`` of the event saying which part of a torchrun run (its id, node, ranks) gpudash sees
PROCESSES = "processes"  # the ``what`` of the event saying how several processes' steps of a rank are counted
FLOPS = "flops"  # the ``what`` of the event saying what a model FLOPs count was, or why MFU is blank
OUT_OF_MEMORY = "out_of_memory"  # the ``what`` of the error event explaining a job's death of an OOM error
MEMORY = "memory"  # the ``what`` of the event saying what a job's memory holds by kind (``gpudash.job.memory``)
# a "crashed" event's details[REFUSED] = "true": the first configuration was refused (a batch that
# would not fit, a bad setting for this machine): a usage error of the run, not a failure of it
REFUSED = "refused"
# details[TRACEBACK] = "log": the refusal came from the user's own code (``-w FILE.py:FUNCTION``),
# whose traceback the workload process printed to its log: the log is kept and named
TRACEBACK = "traceback"


@dataclass(frozen=True)
class Event:
    time_s: float
    kind: EventKind
    what: str = ""  # "variant", "batch_size", "workload", ... (for "changed" and "error")
    before: str = ""
    after: str = ""
    message: str = ""  # one line for the user
    # Extra facts, text only. "started"/"changed": the configuration now running (workload,
    # variant, batch_size, device, knobs); "started" also torch, cuda, device_name, gpu_uuid, pid.
    details: dict[str, str] = field(default_factory=dict, compare=False)
    # The configuration the details name, typed (read from them once, here); None: they name none.
    # Given instead of the details' configuration keys, it fills them in (the CSV keeps text).
    running: Running | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", EventKind(self.kind))  # text from a CSV: checked here
        if self.running is None:
            object.__setattr__(self, "running", Running.from_details(self.details))
        elif not self.details.get("workload"):
            object.__setattr__(self, "details", {**self.details, **self.running.details()})

    @property
    def label(self) -> str:
        """A short label for a chart marker or a log line."""
        if self.kind == EventKind.CHANGED and self.what:
            return f"{self.what}: {self.before} → {self.after}"
        return self.message or self.kind.value


# -- NVML, produced in the parent ---------------------------------------------------------------
@dataclass(frozen=True)
class GpuInfo:
    """What NVML says about the machine; ``unavailable`` says why NVML gives nothing."""

    available: bool
    unavailable: str | None = None
    driver: str | None = None
    names: tuple[str, ...] = ()  # every GPU of the machine, by index
    index: int | None = None  # the GPU sampled (the workload's device)
    sampled: tuple[int, ...] = ()  # the GPUs with a per-GPU reading in every sample (NVML indexes, in order)
    gpm_unavailable: str | None = None  # why the GPM figures (SM, tensor, DRAM activity) stay empty; None: they flow

    @property
    def name(self) -> str | None:
        if self.index is None or self.index >= len(self.names):
            return None
        return self.names[self.index]


@dataclass(frozen=True)
class GpuReading:
    """One GPU's telemetry in an NVML tick (``GpuSample.per_gpu``); ``None``: not available.
    The fields are the catalog's per-GPU metrics (``gpudash.core.metrics.PER_GPU_KEYS``) and the total memory."""

    index: int  # the NVML index (as nvidia-smi numbers the GPUs)
    gpu_util_pct: float | None = None
    mem_used_mib: float | None = None
    mem_total_mib: float | None = None
    power_w: float | None = None
    sm_clock_mhz: float | None = None
    temp_c: float | None = None
    sm_active_pct: float | None = None  # GPM (Hopper and newer)
    tensor_active_pct: float | None = None
    dram_active_pct: float | None = None

    @property
    def answered(self) -> bool:
        """Some query for this GPU answered this tick (False: every one failed)."""
        return any(getattr(self, f.name) is not None for f in fields(self) if f.name != "index")


@dataclass(frozen=True)
class MigReading:
    """One MIG GPU instance's GPM figures in an NVML tick (``GpuSample.mig``)."""

    label: str  # "GPU 0 · GI 1": the GPU's NVML index and the GPU instance's id
    sm_active_pct: float | None = None
    tensor_active_pct: float | None = None
    dram_active_pct: float | None = None


MIG_FIGURES = ("sm_active_pct", "tensor_active_pct", "dram_active_pct")  # a MigReading's figures, in its order


@dataclass(frozen=True)
class GpuSample:
    """One NVML tick. ``None`` means not available (unsupported on this GPU, or the query failed)."""

    time_s: float
    gpu_util_pct: float | None = None  # kernel-active %: share of time any kernel ran, NOT SM occupancy
    mem_bw_util_pct: float | None = None
    mem_used_mib: float | None = None
    mem_total_mib: float | None = None
    power_w: float | None = None
    sm_clock_mhz: float | None = None
    temp_c: float | None = None
    energy_j: float | None = None  # energy since the sampler started
    throttle: str | None = None  # active throttle reasons, e.g. "sw_power_cap|hw_slowdown"; "" if none
    # GPM, NVML's GPU performance monitoring (Hopper and newer), over the tick: None where not
    # supported (``GpuInfo.gpm_unavailable`` says why) or not answered this tick
    sm_active_pct: float | None = None  # share of the SMs' time they were busy (not "a kernel ran")
    sm_occupancy_pct: float | None = None
    tensor_active_pct: float | None = None
    hmma_active_pct: float | None = None
    dfma_active_pct: float | None = None
    dram_active_pct: float | None = None
    pcie_tx_mib_s: float | None = None
    pcie_rx_mib_s: float | None = None
    nvlink_tx_mib_s: float | None = None
    nvlink_rx_mib_s: float | None = None
    # MIG: each GPU instance's GPM figures, labelled ("GPU 0 · GI 1"); () without MIG
    mig: tuple[MigReading, ...] = ()
    per_gpu: tuple[GpuReading, ...] = ()  # every GPU watched (``GpuInfo.sampled``), the workload's included
    gpu_pids: tuple[int, ...] | None = None  # the compute processes on the workload's GPU (None: not read)


@dataclass(frozen=True)
class SyncSites:
    """The lines that make the host wait in the configuration running now
    (``gpudash.core.sync_sites``): the child sends one after a sample when the table changed."""

    time_s: float
    workload: str
    variant: str
    batch_size: int
    knobs: str
    table: SyncTable
    not_counted: str = ""  # why torch.cuda.synchronize() and Event.synchronize() are not counted ("": they are)

    @property
    def configuration(self) -> str:
        """``sync_loss/sync-heavy bs32`` (``+knobs`` when any are on)."""
        knobs = "" if self.knobs == "none" else f"+{self.knobs}"
        return f"{self.workload}/{self.variant}{knobs} bs{self.batch_size}"


def config_key(msg: Sample | SyncSites) -> tuple[str, str, int, str]:
    """What configuration a sample or a sync table is of: (workload, variant, batch size, knobs)."""
    return (msg.workload, msg.variant, msg.batch_size, msg.knobs)


Message = Sample | Event | GpuSample | SyncSites | RankSample


@dataclass(frozen=True)
class SourceInfo:
    """What a source says about itself besides its messages (the dashboard shows it)."""

    replay: bool = False  # a recording: read-only, no controls
    path: str | None = None  # the recording's file
    follow: bool = False  # the recording is read as it grows
    log_path: str | None = None  # where the workload process's own output goes
    started_details: dict[str, str] = field(default_factory=dict)  # the last "started" event's
    bad_rows: int = 0  # malformed rows of a recording skipped so far
    loading: str | None = None  # a recording still being read: how far ("reading 37% of run.csv (…)")
    notes: tuple[str, ...] = ()  # one-line warnings to tell once it has started (a metadata file ignored)


class EngineSource(Protocol):
    """What the recorder and the dashboard listen to: a running workload plus GPU telemetry."""

    config: RunConfig

    @property
    def gpu_info(self) -> GpuInfo:
        """What NVML says of the GPU watched (read-only here: a source may compute it)."""
        ...

    @property
    def info(self) -> SourceInfo: ...

    def start(self) -> None: ...

    def send(self, control: Control) -> None: ...

    def poll(self) -> list[Message]:
        """Everything that arrived since the last poll, oldest first; never blocks."""
        ...

    @property
    def alive(self) -> bool: ...

    def restart(self) -> None: ...

    def stop(self) -> None:
        """Stop the child (and NVML thread): join with timeout, then terminate. Idempotent."""
        ...
