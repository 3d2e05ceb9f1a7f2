"""The metric catalog: one row per measured quantity, from which everything else derives.

The CSV's columns, the stats panel's columns, the dashboard's chart series, and the figures
of sweeps and reports all read this table; nothing else lists metrics. Torch- and
Textual-free. To add a metric: add the field to ``Sample`` (the child measures it) or
``GpuSample`` (NVML), then one ``_row`` here, in the position its CSV column takes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum, IntEnum


class Origin(str, Enum):
    """Where a metric's values come from."""

    WORKLOAD = "workload"  # the child's Sample
    NVML = "nvml"  # the parent's GpuSample
    DERIVED = "derived"  # computed from both (joules per step)
    RANKS = "ranks"  # a data-parallel run's ranks (Sample fields the parent fills in; CSV columns after knobs)
    ALLOCATOR = "allocator"  # the workload's CUDA caching allocator (Sample fields; CSV columns after the ranks')
    GPM = "gpm"  # NVML's GPU performance monitoring, Hopper and newer (GpuSample fields; CSV columns after the noise)
    MODEL = "model"  # the model FLOPs of a step and what they make of the GPU's peak (Sample fields; after GPM's)
    TRAINING = "training"  # a job's seconds of training steps in a sample (Sample field; after GPM's per-GPU)
    MEMORY = "memory"  # what a job's memory holds by kind (Sample fields; the very last columns)

    @property
    def from_gpu(self) -> bool:
        """Values of the parent's NVML tick (``GpuSample``), not of the workload's ``Sample``."""
        return self in (Origin.NVML, Origin.GPM)


class Better(IntEnum):
    """Which direction is an improvement (colours the stats panel's change)."""

    HIGHER = 1
    LOWER = -1
    NEITHER = 0  # telemetry: a change is neither good nor bad


class Averaging(str, Enum):
    """How a configuration's mean is taken."""

    TIME = "time"  # weighted by each sample's interval (rates)
    EACH = "each"  # each value counts once
    ENDS = "ends"  # from the configuration's first and last value (energy per step)


@dataclass(frozen=True)
class Metric:
    key: str  # the Sample/GpuSample field; also the CSV column and the chart series name
    label: str  # the stats panel's column heading
    unit: str
    origin: Origin
    better: Better = Better.NEITHER
    needs_gpu: bool = False  # empty without NVML: hidden from the stats panel then
    kind: type = float  # int, float or str in the CSV
    csv_decimals: int | None = None  # fixed decimals (counters that grow); None: 6 significant digits
    stat: bool = False  # a column of the stats panel
    series: bool = False  # kept as a chart series
    per_gpu: bool = False  # also read for every GPU watched: CSV columns gpu0_util_pct, gpu1_… (GpuReading)
    mean: Averaging | None = None  # how the configuration's mean is taken (None: not averaged)
    figure: bool = False  # a figure of sweeps and reports (their CSV columns and tables), in this order
    per_batch: bool = False  # scales with the batch size: not compared across batch sizes
    description: str = ""

    @property
    def csv_column(self) -> str:
        return self.key


_W, _N, _D, _R, _A = Origin.WORKLOAD, Origin.NVML, Origin.DERIVED, Origin.RANKS, Origin.ALLOCATOR
_G, _M, _T, _MEM = Origin.GPM, Origin.MODEL, Origin.TRAINING, Origin.MEMORY
_UP, _DOWN, _ANY = Better.HIGHER, Better.LOWER, Better.NEITHER
_TIME, _EACH, _ENDS = Averaging.TIME, Averaging.EACH, Averaging.ENDS
_FLAGS = ("stat", "series", "figure", "per_gpu", "per_batch")  # the words of a row's flags


def _row(
    key: str,
    label: str,
    unit: str,
    origin: Origin,
    better: Better,
    mean: Averaging | None,
    kind: type,
    flags: str,
    description: str,
    csv_decimals: int | None = None,
) -> Metric:
    """A catalog row: ``flags`` names the ``_FLAGS`` that are true; ``needs_gpu`` follows from the origin."""
    words = flags.split()
    if unknown := set(words) - set(_FLAGS):
        raise ValueError(f"metric {key}: unknown flags {sorted(unknown)}")
    return Metric(
        key,
        label,
        unit,
        origin,
        better,
        needs_gpu=origin in (Origin.NVML, Origin.DERIVED, Origin.GPM),
        kind=kind,
        csv_decimals=csv_decimals,
        mean=mean,
        description=description,
        **{flag: flag in words for flag in _FLAGS},
    )


# One row per metric, in CSV column order; each row's second line is its description.
# fmt: off
METRICS: tuple[Metric, ...] = (
    #    key                     label           unit   origin better mean   kind   flags
    _row("steps",                "steps",        "",    _W,    _ANY,  None,  int,   "",
         "steps done since the run started"),
    _row("samples",              "samples",      "",    _W,    _ANY,  None,  int,   "",
         "samples trained since the run started"),
    _row("interval_s",           "interval s",   "s",   _W,    _ANY,  None,  float, "",
         "the span the sample covers"),
    _row("steps_per_s",          "steps/s",      "",    _W,    _UP,   _TIME, float, "stat series figure per_batch",
         "training steps finished per second"),
    _row("samples_per_s",        "samples/s",    "",    _W,    _UP,   _TIME, float, "stat series figure",
         "samples (batch items) trained per second"),
    _row("step_ms_p50",          "p50 ms",       "ms",  _W,    _DOWN, _EACH, float, "stat series per_batch",
         "median step time in the interval (CUDA events on a GPU)"),
    _row("step_ms_p95",          "p95 ms",       "ms",  _W,    _DOWN, _EACH, float, "stat series per_batch",
         "95th percentile step time in the interval"),
    _row("syncs_per_step",       "syncs/st",     "",    _W,    _DOWN, _EACH, float, "stat series figure",
         "times per step the host waited for the GPU (CUDA only)"),
    _row("loss",                 "loss",         "",    _W,    _ANY,  None,  float, "",
         "the latest training loss read back"),
    _row("gpu_util_pct",         "kernel%",      "%",   _N,    _ANY,  _EACH, float, "stat series figure per_gpu",
         "share of time ANY kernel ran (not SM occupancy)"),
    _row("mem_bw_util_pct",      "mem-bw%",      "%",   _N,    _ANY,  _EACH, float, "stat series",
         "share of time device memory was read or written"),
    _row("mem_used_mib",         "mem MiB",      "MiB", _N,    _ANY,  _EACH, float, "series per_gpu",
         "device memory in use (all processes)"),
    _row("mem_total_mib",        "mem total",    "MiB", _N,    _ANY,  None,  float, "",
         "device memory in all"),
    _row("power_w",              "power W",      "W",   _N,    _ANY,  _EACH, float, "stat series figure per_gpu",
         "board power draw"),
    _row("sm_clock_mhz",         "SM MHz",       "MHz", _N,    _ANY,  _EACH, float, "series per_gpu",
         "streaming-multiprocessor clock"),
    _row("temp_c",               "temp °C",      "°C",  _N,    _ANY,  None,  float, "series per_gpu",
         "GPU temperature"),
    _row("energy_j",             "energy J",     "J",   _N,    _ANY,  None,  float, "",
         "energy since the sampler started", csv_decimals=3),
    _row("throttle",             "throttle",     "",    _N,    _ANY,  None,  str,   "",
         "active throttle reasons ('' if none)"),
    _row("joules_per_step",      "J/step",       "J",   _D,    _DOWN, _ENDS, float, "stat figure per_batch",
         "NVML energy over the steps done (see gpudash.stats.energy)"),
    _row("world_size",           "ranks",        "",    _R,    _ANY,  None,  int,   "",
         "data-parallel ranks training together (1: one process); samples count all of them"),
    _row("slowest_rank",         "slowest rank", "",    _R,    _ANY,  None,  int,   "",
         "the rank with the largest step time p50 in the latest reports"),
    _row("slowest_rank_step_ms", "slowest ms",   "ms",  _R,    _DOWN, _EACH, float, "per_batch",
         "that rank's step time p50"),
    _row("cuda_allocated_mib",   "alloc MiB",    "MiB", _A,    _ANY,  None,  float, "",
         "device memory the workload's tensors hold (torch.cuda.memory_allocated; CUDA only)"),
    _row("cuda_reserved_mib",    "reserved MiB", "MiB", _A,    _ANY,  None,  float, "",
         "device memory torch's caching allocator holds, in use or cached (memory_reserved; CUDA only); "
         "mem_used_mib minus this is the CUDA context, libraries and other processes"),
    # NVML's GPU performance monitoring (GPM; Hopper and newer), over each NVML tick
    _row("sm_active_pct",        "SM%",          "%",   _G,    _ANY,  _EACH, float, "stat series figure per_gpu",
         "share of the SMs' time they were busy (GPM): what 'GPU-bound' means, unlike kernel%"),
    _row("sm_occupancy_pct",     "occupancy%",   "%",   _G,    _ANY,  _EACH, float, "series",
         "resident warps over the SMs' maximum (GPM)"),
    _row("tensor_active_pct",    "tensor%",      "%",   _G,    _ANY,  _EACH, float, "stat series figure per_gpu",
         "share of the SMs' time any tensor core ran (GPM)"),
    _row("hmma_active_pct",      "HMMA%",        "%",   _G,    _ANY,  None,  float, "",
         "share of the SMs' time half-precision (HMMA) tensor math ran (GPM)"),
    _row("dfma_active_pct",      "DFMA%",        "%",   _G,    _ANY,  None,  float, "",
         "share of the SMs' time double-precision (DFMA) tensor math ran (GPM)"),
    _row("dram_active_pct",      "DRAM%",        "%",   _G,    _ANY,  _EACH, float, "stat series figure per_gpu",
         "DRAM bandwidth used over its maximum (GPM)"),
    _row("pcie_tx_mib_s",        "PCIe tx",      "MiB/s", _G,  _ANY,  None,  float, "",
         "PCIe traffic from the GPU (GPM)"),
    _row("pcie_rx_mib_s",        "PCIe rx",      "MiB/s", _G,  _ANY,  None,  float, "",
         "PCIe traffic to the GPU (GPM)"),
    _row("nvlink_tx_mib_s",      "NVLink tx",    "MiB/s", _G,  _ANY,  None,  float, "",
         "NVLink traffic from the GPU, all links (GPM)"),
    _row("nvlink_rx_mib_s",      "NVLink rx",    "MiB/s", _G,  _ANY,  None,  float, "",
         "NVLink traffic to the GPU, all links (GPM)"),
    # the model FLOPs of one step (counted once per configuration, eagerly) and the GPU's dense peak
    _row("flops_per_step",       "FLOP/step",    "",    _M,    _ANY,  None,  float, "",
         "model FLOPs of one step on one GPU (torch's FLOP formulas on an eager step)", csv_decimals=0),
    _row("tflops",               "TFLOP/s",      "",    _M,    _UP,   _TIME, float, "series",
         "model FLOPs per second on one GPU: FLOPs per step × steps/s"),
    _row("mfu_pct",              "MFU%",         "%",   _M,    _UP,   _TIME, float, "stat series figure",
         "model FLOPs utilisation: TFLOP/s over the GPU's dense peak for the step's dtype"),
    # a user's job: the seconds of training steps the sample's rates are over (its weight)
    _row("train_s",              "train s",      "s",   _T,    _ANY,  None,  float, "",
         "seconds of training steps the rates are over (a job's; empty: the whole interval)"),
    # a user's job: what its memory holds by kind, as last counted (``gpudash.job.memory``)
    _row("mem_params_mib",       "params MiB",   "MiB", _MEM,  _ANY,  None,  float, "",
         "the parameters of the optimizer the job steps (a job's; every storage once)"),
    _row("mem_grads_mib",        "grads MiB",    "MiB", _MEM,  _ANY,  None,  float, "",
         "their gradients, at the step's end"),
    _row("mem_optimizer_mib",    "optim MiB",    "MiB", _MEM,  _ANY,  None,  float, "",
         "the optimizer's state (Adam's moments, its step counts)"),
    _row("mem_activations_mib",  "activ MiB",    "MiB", _MEM,  _ANY,  None,  float, "",
         "the tensors autograd saved for backward in a sampled step (parameters left out)"),
    _row("mem_peak_mib",         "peak MiB",     "MiB", _MEM,  _ANY,  None,  float, "",
         "the caching allocator's peak allocated bytes so far (the job's own peak; CUDA only)"),
    _row("mem_rss_mib",          "RSS MiB",      "MiB", _MEM,  _ANY,  None,  float, "",
         "the job's process's resident set (on the CPU, where there is no allocator)"),
)
# fmt: on

BY_KEY: dict[str, Metric] = {m.key: m for m in METRICS}


def metric(key: str) -> Metric:
    """The catalog row for ``key`` (KeyError names the key)."""
    return BY_KEY[key]


def overlap_bound(stage_ms: Iterable[float]) -> float | None:
    """The steps/s a perfect pipeline of the stages reaches: 1000 / the slowest stage's ms per
    step. None with fewer than two stages or no positive time."""
    times = list(stage_ms)
    if len(times) < 2 or max(times) <= 0:
        return None
    return 1000.0 / max(times)


def keys(origin: Origin | None = None, **flags: bool) -> tuple[str, ...]:
    """Keys in catalog order, filtered by origin and by flags (``stat=True``, ``series=True``)."""
    return tuple(
        m.key
        for m in METRICS
        if (origin is None or m.origin == origin) and all(getattr(m, f) == v for f, v in flags.items())
    )


WORKLOAD_KEYS = keys(Origin.WORKLOAD)
RANK_KEYS = keys(Origin.RANKS)
ALLOCATOR_KEYS = keys(Origin.ALLOCATOR)
NVML_KEYS = keys(Origin.NVML)
GPM_KEYS = keys(Origin.GPM)
MODEL_KEYS = keys(Origin.MODEL)
TRAINING_KEYS = keys(Origin.TRAINING)
STAT_KEYS = keys(stat=True)
SERIES_KEYS = keys(series=True)
PER_BATCH_KEYS = keys(per_batch=True)  # compared only between runs of one batch size
FIGURE_KEYS = keys(figure=True)  # what sweeps and reports tabulate per configuration
PER_GPU_KEYS = keys(per_gpu=True)  # the fields of a GpuReading that have CSV columns, in column order
# the per-GPU fields every per-GPU recording has (those added with GPM may be missing)
PER_GPU_BASE_KEYS = tuple(k for k in PER_GPU_KEYS if BY_KEY[k].origin == Origin.NVML)
