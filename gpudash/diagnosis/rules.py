"""Classify what bounds a running configuration from the evidence of one diagnosis window.

The window (``gpudash.engine.measure_windows.diagnose``) measures, apart from the samples:

- the wall time of a step, untraced, and how much of it the host spent waiting for the next batch (``input_ms``:
  inside the workload's input draw, the loader's queue included);
- the host-device syncs inside the steps (``syncs_per_step``; CUDA only);
- from a profiler window (CUDA only), all from that one window: the span of its steps (the first step marker's start
  to the last kernel's end), the share of it the GPU ran anything (``gpu_busy_pct``: kernels, copies and memsets on
  any stream, their union, so never over 100), the GPU's busy time per step, the host's time to enqueue a step (its
  marker's median) and the median launch delay (a kernel's launch call to its start: microseconds when nothing waits
  in the GPU's queue, milliseconds when the host runs ahead of a busy GPU).

and the parent may add NVML's memory-bandwidth share and throttling and, on Hopper and newer, GPM's SM, tensor-core
and DRAM activity (``sm_active_pct`` …: the share of the SMs' time they were busy, which "a kernel ran" is not), all
from the last NVML tick before the window began (``tick_before_window``: the configuration's steady state); the
workload process adds the step's dtype from its FLOP count. The rules, in order:

1. **input-bound**: at least ``INPUT_SHARE`` of the step waits for the next batch;
2. **sync-bound**: the host waits for the GPU inside the step and the GPU is not kept busy — or it waits
   ``MANY_SYNCS`` times or more, busy GPU or not: waits that many come from data-dependent shapes (nonzero, unique,
   boolean masks), slow kernels themselves, and they keep the step from being captured or overlapped (one wait, a
   logged loss, does not);
3. **GPU-bound**: the GPU ran kernels at least ``GPU_BUSY`` of the steps' span — or at least ``GPU_BUSY_QUEUED`` of
   it while launched work waits ``QUEUED_US`` or more in the GPU's queue (the host runs ahead; the gaps are the
   GPU's own) — and, where GPM reads, the SMs were busy at least ``SM_BUSY`` of the time: *memory* when the DRAM
   bandwidth share (GPM's, else NVML's) is at least ``MEMORY_BW``, *compute* otherwise (a bf16 step whose tensor
   cores idle, below ``TENSOR_IDLE``, says so). Busy with the SMs below ``SM_BUSY`` is **busy, SMs idle**: kernels
   too small to fill the GPU. Without GPM the rule is kernel time alone, and the verdict says so;
4. **communication-bound** (data-parallel runs): the collectives' kernels (NCCL's) run with no computation kernel
   beside them (the traced steps' share, of the untraced step) at least ``COMM_SHARE`` of the step, and that is its
   largest part (``step_parts``) — checked right after input-bound: before sync-bound (FSDP2 on 2 H200s, collectives
   exposed 10.0 of 15.6 ms, 2 syncs a step, was called sync-bound) and GPU-bound, whose busy time counts those
   kernels too;
5. **host/launch-bound**: none of those: the GPU idles between kernels and its queue is empty, the host enqueues a
   step slower than the GPU runs it (on an H100: a kernel starts ~12 µs after its launch here, against ~50 ms in a
   GPU-bound step's queue).

On the CPU (no GPU figures) a step that does not wait for input is **CPU-bound**: the step's own arithmetic. Each
verdict carries its evidence and what to try next, in one line."""

from __future__ import annotations

import dataclasses
import enum
import json
import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from gpudash.core.protocol import JOB_PREFIX, Event, GpuSample
from gpudash.core.sync_sites import SyncTable
from gpudash.core.textfmt import plain

INPUT_SHARE = 0.30  # of a step spent waiting for the next batch: input-bound at or above
GPU_BUSY = 90.0  # % of the steps' span the GPU ran anything: GPU-bound at or above
GPU_BUSY_QUEUED = 75.0  # % busy that is GPU-bound too when launched work queues (QUEUED_US)
QUEUED_US = 1000.0  # median wait of launched work in the GPU's queue: the host runs ahead at or above
MEMORY_BW = 60.0  # NVML's memory-bandwidth %: a GPU-bound step is memory-bound at or above
MANY_SYNCS = 2.0  # host waits per step: sync-bound at or above, however busy the GPU
SM_BUSY = 40.0  # GPM's SM activity %: a GPU busy with kernels is GPU-bound at or above, SM-idle below
TENSOR_IDLE = 10.0  # GPM's tensor-core activity %: a bf16 step's tensor cores idle below
COMM_SHARE = 0.25  # of a step the all-reduce runs exposed (no other kernel): communication-bound at or above


class Bound(enum.StrEnum):
    INPUT = "input-bound"
    SYNC = "sync-bound"
    HOST = "host/launch-bound"
    GPU_COMPUTE = "GPU-bound (compute)"
    GPU_MEMORY = "GPU-bound (memory)"
    CPU = "CPU-bound"
    SMALL_KERNELS = "busy, SMs idle"
    COMM = "communication-bound"


@dataclass(frozen=True)
class Evidence:
    """What one diagnosis window measured (None: not measurable here)."""

    steps: int
    step_ms: float  # wall time per step, untraced
    input_ms: float  # of it, waiting for the next batch
    syncs_per_step: float | None = None  # CUDA only
    sync_sites: SyncTable | None = None  # where those syncs come from (CUDA only)
    gpu_busy_pct: float | None = None  # profiler window, CUDA only: busy share of the steps' span
    gpu_ms_per_step: float | None = None  # the GPU's busy time per step, same window
    host_ms_per_step: float | None = None  # the host's time to enqueue a step, same window (median)
    launch_delay_us: float | None = None  # median, CPU launch call to kernel start
    mem_bw_pct: float | None = None  # NVML, added by the parent
    throttled: str | None = None  # NVML's throttle reasons, when any
    sm_active_pct: float | None = None  # GPM (Hopper and newer), added by the parent
    tensor_active_pct: float | None = None
    dram_active_pct: float | None = None
    dtype: str | None = None  # the step's dtype from its FLOP count (gpudash.engine.flops), when one
    comm_exposed_ms: float | None = None  # profiler window: collectives' exposed share, in ms of this (untraced) step
    comm_exposed_kinds: str | None = None  # ... of it, each kind's ("all-reduce=12.000,reduce-scatter=2.100")
    host_wait_ms: float | None = None  # profiler window: of the host's step, the time in calls that wait for the GPU
    traced_step_ms: float | None = None  # profiler window: a step's wall time under the profiler
    job_settings: str | None = None  # a user's job: what it already does ("num_workers=0,pin_memory=True,…")
    input_dataset_ms: float | None = None  # a job's loader without workers: of input_ms, in its Dataset ...
    input_collate_ms: float | None = None  # ... and collating the batch (None: made by workers, or unknown)
    cpus: int | None = None  # a user's job: the CPUs it may run on (its affinity), where known

    @property
    def input_share(self) -> float:
        return self.input_ms / self.step_ms if self.step_ms > 0 else 0.0

    def details(self) -> dict[str, str]:
        """As an event's text details (``diag_`` + field; absent when unmeasured)."""
        out = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, SyncTable):
                out[f"diag_{f.name}"] = json.dumps(value.as_dict(), separators=(",", ":"))
            elif value is not None:
                out[f"diag_{f.name}"] = f"{value:.4g}" if isinstance(value, float) else str(value)
        return out

    @classmethod
    def from_details(cls, details: dict[str, str]) -> Evidence:
        """Back from ``details()`` (the diagnosis event's, as the parent receives it)."""
        kw: dict[str, object] = {}
        for f in dataclasses.fields(cls):
            text = details.get(f"diag_{f.name}")
            if text is None:
                continue
            if f.name == "sync_sites":
                kw[f.name] = _table(text)
            else:
                kw[f.name] = text if f.name in _TEXT else int(text) if f.name == "steps" else float(text)
        return cls(**kw)  # type: ignore[arg-type]  # the fields' own types, read back


_TEXT = ("throttled", "dtype", "job_settings", "comm_exposed_kinds")  # Evidence's text fields
DATASET_SHARE = 0.5  # a Dataset's share of the input wait from which workers are the fix ...
# ... when it is longer than this too: a worker hands each batch over (a queue, shared memory), which
# cost about 1.6 ms a batch more than making it in the loop did for an in-memory TensorDataset of 64
# rows on the 2-core machine (docs/bench/cpu-input: tune's race on tests/data/jobs/in_memory.py)
HANDOVER_MS = 1.0
RECENT_GPU_TICKS = 600  # NVML ticks a reader keeps for tick_before_window (5 minutes at 0.5 s)
WINDOW_START = "diag_window_start_s"  # a diagnosis event's detail: when its window began (the run's seconds)
TENSORS_IDLE = "tensors-idle"  # a bf16 step whose tensor cores idle: compute-bound, advice of its own
FSDP = "fsdp"  # a communication-bound job's FSDP2 model: advice of its own
# What to try, in the words of a script rather than of gpudash's knobs and flags (which a job has not)
SCRIPT_ADVICE: dict[str, str] = {
    Bound.INPUT: "make the input pipeline faster: more DataLoader workers (num_workers), pin_memory=True, "
    "decode or augment on the GPU",
    Bound.SYNC: "keep the step free of .item(), .cpu(), printing a tensor and data-dependent shapes (read values "
    "after the step, asynchronously); then CUDA graphs apply",
    Bound.CPU: "move the model and its batches to a GPU (.to('cuda')); on the CPU, a smaller model or batch",
    Bound.COMM: "hide the all-reduce behind the backward pass: DistributedDataParallel(bucket_cap_mb=100, "
    "gradient_as_bucket_view=True), or a larger batch per rank",
    Bound.GPU_MEMORY: "move fewer bytes, where the job does not already: bf16 autocast, torch.compile (fuses "
    "elementwise kernels), channels_last for convolutions",
    Bound.GPU_COMPUTE: "faster arithmetic, where the job does not already: bf16 autocast, TF32 matmuls, "
    "channels_last with cudnn.benchmark for convolutions, torch.compile",
    Bound.HOST: "launch less from Python: CUDA graphs or torch.compile(mode='reduce-overhead'), or a larger batch",
    Bound.SMALL_KERNELS: "give each kernel more work: a larger batch, CUDA graphs, or torch.compile (fuses small "
    "kernels)",
    TENSORS_IDLE: "get the matmuls onto the tensor cores: bf16 inputs (autocast covers them), sizes in multiples of 8",
    FSDP: "overlap the all-gathers and reduce-scatters with computation: FSDP2's explicit prefetching "
    "(set_modules_to_forward_prefetch, set_modules_to_backward_prefetch), reshard_after_forward=False for the "
    "last blocks (no all-gather again in the backward), a larger batch per rank",
}


@dataclass(frozen=True)
class Diagnosis:
    bound: Bound
    why: str  # the evidence, in words
    advice: str  # what to try next
    case: str = ""  # a case of the bound with advice of its own (TENSORS_IDLE); "": the bound's

    def in_script_words(self) -> Diagnosis:
        """The advice in the words of a training script (``SCRIPT_ADVICE``), not gpudash's knobs: a
        user's job (``gpudash -- CMD``) has none of them."""
        return dataclasses.replace(self, advice=SCRIPT_ADVICE.get(self.case or self.bound, self.advice))

    def line(self) -> str:
        """One line for the dashboard, the CSV's event and ``gpudash diagnose``."""
        return f"{self.bound}: {self.why} — {self.advice}"

    def as_dict(self, evidence: Evidence) -> dict[str, object]:
        """For ``--json``: the verdict, its words and every figure it rests on."""
        return {
            "bound": str(self.bound),
            "why": self.why,
            "advice": self.advice,
            "evidence": {
                f.name: value.as_dict() if isinstance(value, SyncTable) else value
                for f in dataclasses.fields(evidence)
                if (value := getattr(evidence, f.name)) is not None
            },
        }


def diagnose(e: Evidence) -> Diagnosis:
    """The rules above, in order, on one window's evidence."""
    if e.input_share >= INPUT_SHARE:
        return Diagnosis(
            Bound.INPUT,
            f"{100 * e.input_share:.0f}% of each step waits for the next batch "
            f"({e.input_ms:.3g} of {e.step_ms:.3g} ms)",
            "make the input pipeline faster: more loader workers, pin_memory, decode or augment on the GPU",
        )
    busy = e.gpu_busy_pct
    if busy is not None and (comm := _communication(e)) is not None:
        return comm  # the step's largest part, before its syncs: they cost the GPU less than that
    syncs = e.syncs_per_step
    if syncs is not None and syncs >= 1 and (busy is None or busy < GPU_BUSY or syncs >= MANY_SYNCS):
        idle = f", and the GPU idles {100 - busy:.0f}% of the time" if busy is not None else ""
        where = e.sync_sites.summary() if e.sync_sites is not None else ""
        return Diagnosis(
            Bound.SYNC,
            f"the host waits for the GPU {e.syncs_per_step:.3g} times a step{idle}"
            + (f" — at {where}" if where else ""),
            "keep the step free of .item(), .cpu(), printing a tensor and data-dependent shapes "
            "(read values after the step, asynchronously); then cuda_graph applies",
        )
    if busy is None:
        return Diagnosis(
            Bound.CPU,
            f"the step's own arithmetic on the CPU, {e.step_ms:.3g} ms a step "
            f"({100 * e.input_share:.0f}% of it waiting for input)",
            "run it on a GPU (--device cuda); on the CPU, a smaller model or batch",
        )
    queued = e.launch_delay_us is not None and e.launch_delay_us >= QUEUED_US
    if busy >= GPU_BUSY or (queued and busy >= GPU_BUSY_QUEUED):
        return _gpu_busy(e, busy, queued)
    return Diagnosis(
        Bound.HOST,
        f"{_enqueue(e)}; the GPU idles {100 - busy:.0f}% of the time{_delay(e, queued=False)}",
        "launch less from Python: cuda_graph or compile=reduce-overhead, or a larger batch",
    )


def for_the_job(d: Diagnosis, e: Evidence) -> Diagnosis:
    """A job's verdict with its advice left without what the job already does (its training
    DataLoader's arguments, its backend flags, its dtype: ``Evidence.job_settings``)."""
    if d.bound == Bound.INPUT:
        return dataclasses.replace(d, advice=input_advice(e))
    if d.bound == Bound.GPU_COMPUTE and not d.case:
        return dataclasses.replace(d, advice=gpu_advice(e))
    if d.bound == Bound.COMM:
        return dataclasses.replace(d, advice=comm_advice(e))
    return d


def job_settings(text: str) -> dict[str, str]:
    """What a job already does, as its hooks say it at the first step ("cudnn_benchmark=False,…,
    num_workers=0,…,site=/path/train.py:39"; the loader's site last, whatever its path holds)."""
    head, has_site, site = text.partition("site=")
    pairs = (item.partition("=") for item in head.split(",") if "=" in item)
    return {**{k.strip(): v.strip() for k, _, v in pairs}, **({"site": site} if has_site else {})}


def input_advice(e: Evidence) -> str:
    """The input pipeline's fixes a job does not already have, for the part of the input time they
    act on. Where the job's own process makes its batches (no workers), workers are the fix only
    for a Dataset whose ``__getitem__`` is most of the wait and longer than a worker's hand-over of
    a batch (``HANDOVER_MS``); a batch cheaper to make than to hand over is made faster by making
    less of it: fewer, larger batches, fewer objects to collate. Pinned memory: for a GPU's copies."""
    have = job_settings(e.job_settings or "")
    on_cuda = e.gpu_ms_per_step is not None or e.syncs_per_step is not None
    workers = have.get("num_workers")
    made_here = e.input_dataset_ms is not None and e.input_collate_ms is not None
    dataset, collate = e.input_dataset_ms or 0.0, e.input_collate_ms or 0.0
    if made_here and dataset < max(HANDOVER_MS, DATASET_SHARE * e.input_ms):
        rest = max(0.0, e.input_ms - dataset - collate)
        fixes = ["a larger batch", "fewer Python objects per sample (one tensor per field)"]
        fixes.append(
            "the data kept on the GPU and indexed there" if on_cuda else "the data kept as one tensor and sliced"
        )
        return (
            f"make less of each batch: {', '.join(fixes)} (of the {e.input_ms:.2g} ms a step waits, the Dataset "
            f"takes {dataset:.2g}, collating {collate:.2g}, the rest {rest:.2g}: less than a worker's hand-over "
            f"of a batch, about {HANDOVER_MS:g} ms, so workers would not shorten it)"
        )
    full = workers is not None and workers.isdigit() and e.cpus is not None and int(workers) >= e.cpus - 1 > 0
    steps = [f"more DataLoader workers (num_workers, now {workers})" if workers else "more DataLoader workers"]
    if full:  # its workers and its training loop have every CPU it may use: more would only share them
        steps = [f"cheaper samples, not more DataLoader workers ({workers} and the loop have its {e.cpus} CPUs)"]
    if on_cuda and have.get("pin_memory") != "True":  # the loader's own: what it pins, not what it was asked
        steps.append("pin_memory=True")
    if workers not in (None, "0") and have.get("persistent_workers") != "True":
        steps.append("persistent_workers=True")
    if on_cuda:
        steps.append("decode or augment on the GPU")
    head = "make the input pipeline faster: "
    if made_here:
        head = f"the Dataset's __getitem__ is {e.input_dataset_ms:.2g} ms of the {e.input_ms:.2g} ms a step waits: "
    return head + ", ".join(steps)


def gpu_advice(e: Evidence) -> str:
    """Faster arithmetic a job does not already use."""
    have = job_settings(e.job_settings or "")
    half = e.dtype in ("bf16", "fp16")
    steps = [] if half else ["bf16 autocast"]
    if have.get("tf32") != "True" and not half:
        steps.append("TF32 matmuls")
    if have.get("cudnn_benchmark") != "True":
        steps.append("channels_last with cudnn.benchmark for convolutions")
    if have.get("compiled") != "True":
        steps.append("torch.compile")
    return "faster arithmetic, where the job does not already: " + (", ".join(steps) or "a smaller model or batch")


COMM_PART = "communication"  # step_parts' key of the exposed collectives


def step_parts(e: Evidence) -> dict[str, float]:
    """The parts rule 4 weighs, ms of the untraced step: the input wait, the host's own work (a share of
    the traced step) where launched work does not queue, the GPU's computation, the exposed collectives."""
    parts = {"input": e.input_ms}
    traced = e.traced_step_ms or e.step_ms
    queued = e.launch_delay_us is not None and e.launch_delay_us >= QUEUED_US
    if e.host_ms_per_step is not None and traced > 0 and not queued:
        parts["host"] = max(0.0, e.host_ms_per_step - (e.host_wait_ms or 0.0)) / traced * e.step_ms
    comm = min(e.comm_exposed_ms or 0.0, e.step_ms)
    if e.gpu_busy_pct is not None:
        parts["gpu"] = max(0.0, e.gpu_busy_pct / 100.0 * e.step_ms - comm)  # its busy time less the collectives'
    return {**parts, COMM_PART: comm} if e.comm_exposed_ms is not None else parts


def _communication(e: Evidence) -> Diagnosis | None:
    """Rule 4: the exposed collectives, at least ``COMM_SHARE`` of the step and its largest part; None: not."""
    comm = e.comm_exposed_ms
    if comm is None or e.step_ms <= 0 or comm < COMM_SHARE * e.step_ms or comm < max(step_parts(e).values()):
        return None
    comm = min(comm, e.step_ms)
    kinds = ", ".join(f"{kind} {_ms(ms)}" for kind, ms in comm_kinds(e).items() if ms >= 0.01 * comm)
    return Diagnosis(  # "… 41% of each step (14.1 of 34.3 ms: all-reduce 12.0, reduce-scatter 2.1)"
        Bound.COMM,
        f"collectives run with nothing else on the GPU {100 * comm / e.step_ms:.0f}% of each step "
        f"({_ms(comm)} of {_ms(e.step_ms)} ms{': ' + kinds if kinds else ''})",
        "hide them behind the backward pass: 100 MB buckets and gradient_as_bucket_view (gpudash's DDP "
        "defaults), a larger batch per rank, or fewer all-reduces (ddp_no_sync=K)",
    )


def comm_kinds(e: Evidence) -> dict[str, float]:
    """``Evidence.comm_exposed_kinds`` read back, largest first (names of a-z, - and /: a hostile file's)."""
    each = {k: ms for k, v in job_settings(e.comm_exposed_kinds or "").items() if (ms := _number(v)) is not None}
    valid = {k: ms for k, ms in each.items() if k.islower() and k.replace("-", "").replace("/", "").isalpha()}
    return dict(sorted(valid.items(), key=lambda kv: kv[1], reverse=True))


def comm_advice(e: Evidence) -> str:
    """Ways to hide the collectives that the job's model does not already use (its DDP's settings,
    or FSDP2's, in ``Evidence.job_settings``); neither said: the generic advice."""
    have = job_settings(e.job_settings or "")
    if have.get("fsdp") or not any(key.startswith("ddp_") for key in have):
        return SCRIPT_ADVICE[FSDP if have.get("fsdp") else Bound.COMM]
    fixes = []
    bucket = _number(have.get("ddp_bucket_cap_mb", ""))
    if bucket is None or bucket <= 25.0:  # DistributedDataParallel's default bucket_cap_mb
        fixes.append("bucket_cap_mb=100" + (f" (now {bucket:g})" if bucket is not None else ""))
    if have.get("ddp_gradient_as_bucket_view") != "True":
        fixes.append("gradient_as_bucket_view=True")
    if have.get("ddp_find_unused_parameters") == "True":
        fixes.append("find_unused_parameters=False (it walks the autograd graph every step)")
    more = "a larger batch per rank, or fewer all-reduces (accumulate gradients over K steps under no_sync())"
    if not fixes:
        return f"the job's DistributedDataParallel already has large buckets and gradient_as_bucket_view: {more}"
    return f"hide the all-reduce behind the backward pass: DistributedDataParallel({', '.join(fixes)}), {more}"


def _number(text: str) -> float | None:
    try:
        return value if math.isfinite(value := float(text)) else None
    except ValueError:
        return None


def _ms(v: float) -> str:
    """Milliseconds in plain notation: "12.0", "2.1", "0.34", "1,234.5"."""
    return f"{v:,.1f}" if v >= 0.95 else plain(v, 2)


def _gpu_busy(e: Evidence, busy: float, queued: bool) -> Diagnosis:
    """Rule 3: the GPU ran kernels most of the time; GPM (where it reads) says whether the SMs did."""
    throttle = f"; the GPU is throttled ({e.throttled})" if e.throttled else ""
    kernels = f"kernels ran {busy:.0f}% of the time"
    sm = e.sm_active_pct
    if sm is not None and sm < SM_BUSY:
        return Diagnosis(
            Bound.SMALL_KERNELS,
            f"{kernels} but the SMs were busy {sm:.0f}% of it (GPM): kernels too small to fill the GPU"
            f"{_delay(e, queued=queued)}{throttle}",
            "give each kernel more work: a bigger batch, cuda_graph, or compile (fuses small kernels)",
        )
    gpm = f", SMs busy {sm:.0f}% (GPM)" if sm is not None else " (no GPM figures here: judged by kernel time)"
    dram = e.dram_active_pct if e.dram_active_pct is not None else e.mem_bw_pct
    if dram is not None and dram >= MEMORY_BW:
        source = "DRAM bandwidth" if e.dram_active_pct is not None else "memory bandwidth"
        return Diagnosis(
            Bound.GPU_MEMORY,
            f"{kernels}{gpm}, {source} {dram:.0f}% busy{_delay(e, queued=True)}{throttle}",
            "move fewer bytes: amp=bf16 (half of them), compile (fuses elementwise kernels), channels_last",
        )
    tensor = e.tensor_active_pct
    if e.dtype in ("bf16", "fp16") and tensor is not None and tensor < TENSOR_IDLE:
        return Diagnosis(
            Bound.GPU_COMPUTE,
            f"{kernels}{gpm}, yet the tensor cores idle ({tensor:.0f}%) in a {e.dtype} step{throttle}",
            SCRIPT_ADVICE[TENSORS_IDLE],  # the same in gpudash's words and a script's
            case=TENSORS_IDLE,
        )
    tensor_text = f", tensor cores {tensor:.0f}%" if tensor is not None else ""
    return Diagnosis(
        Bound.GPU_COMPUTE,
        f"{kernels}{gpm}{tensor_text}{_delay(e, queued=True)}{throttle}",
        "faster arithmetic: amp=bf16, tf32, channels_last with cudnn_benchmark for convolutions, compile",
    )


def _enqueue(e: Evidence) -> str:
    """The host's time to enqueue a step against the GPU's time for it, in words."""
    host = e.host_ms_per_step if e.host_ms_per_step is not None else e.step_ms
    gpu = f" whose kernels run {e.gpu_ms_per_step:.3g} ms" if e.gpu_ms_per_step is not None else ""
    return f"the CPU needs {host:.3g} ms to enqueue a step{gpu}"


def _delay(e: Evidence, queued: bool) -> str:
    if e.launch_delay_us is None:
        return ""
    if queued:
        return f", kernels wait {_us(e.launch_delay_us)} in the GPU's queue"
    return f", a kernel starts {_us(e.launch_delay_us)} after its launch"


def _us(us: float) -> str:
    return f"{us / 1000:.3g} ms" if us >= 1000 else f"{us:.0f} µs"


def with_gpu_telemetry(event: Event, gpu: GpuSample | None) -> Event:
    """A diagnosis event judged again with NVML's figures of the GPU it ran on (the parent's: the
    workload process has no NVML): memory-bandwidth share, throttling and GPM's SM, tensor and DRAM
    activity. ``gpu``: the latest GPU sample from before the window (the configuration's steady
    state), None: as it came."""
    gpm = (gpu.sm_active_pct, gpu.tensor_active_pct, gpu.dram_active_pct) if gpu is not None else (None,) * 3
    if gpu is None or (gpu.mem_bw_util_pct is None and not gpu.throttle and gpm == (None,) * 3):
        return event
    evidence = dataclasses.replace(
        Evidence.from_details(event.details),
        mem_bw_pct=gpu.mem_bw_util_pct,
        throttled=gpu.throttle or None,
        sm_active_pct=gpm[0],
        tensor_active_pct=gpm[1],
        dram_active_pct=gpm[2],
    )
    verdict = diagnose(evidence)
    if event.details.get("workload", "").startswith(JOB_PREFIX):
        verdict = for_the_job(verdict.in_script_words(), evidence)
    details = {**event.details, **evidence.details(), "bound": str(verdict.bound)}
    return dataclasses.replace(event, message=verdict.line(), details=details)


def tick_before_window(event: Event, ticks: Sequence[GpuSample]) -> GpuSample | None:
    """The newest NVML tick (of ``ticks``, oldest first) from before a diagnosis event's window
    began — the configuration's steady state, not the window's own seconds (a profiler's stop and
    its trace's export leave the GPU idle); the newest of all for an event that does not say when
    its window began (recorded before it did)."""
    try:
        began = float(event.details[WINDOW_START])
    except (KeyError, ValueError):
        return ticks[-1] if ticks else None
    return next((t for t in reversed(ticks) if t.time_s <= began), None)


class RecentTicks:
    """The latest NVML ticks a reader of the run has seen (the dashboard, a headless recording, a
    sweep, tune): a diagnosis is judged again with the one from before its window."""

    def __init__(self) -> None:
        self._ticks: deque[GpuSample] = deque(maxlen=RECENT_GPU_TICKS)

    def add(self, tick: GpuSample) -> None:
        self._ticks.append(tick)

    def judge(self, event: Event) -> Event:
        """A diagnosis event judged again with NVML's and GPM's figures from before its window."""
        return with_gpu_telemetry(event, tick_before_window(event, self._ticks))


def sync_table_of(details: dict[str, str]) -> SyncTable | None:
    """The sync sites in a diagnosis event's details (None: none, or unreadable)."""
    text = details.get("diag_sync_sites")
    return _table(text) if text else None


def _table(text: str) -> SyncTable | None:
    """A sync table from its JSON (None: unreadable)."""
    try:
        return SyncTable.from_dict(json.loads(text))
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
