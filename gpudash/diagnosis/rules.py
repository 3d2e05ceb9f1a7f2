"""Classify what bounds a running configuration from the evidence of one diagnosis window
(``gpudash.diagnosis.evidence``): ``RULES``, an ordered table of rules, each a function that gives
a verdict or None; the first verdict is the diagnosis. The rules, in order:

1. **input-bound**: at least ``INPUT_SHARE`` of the step waits for the next batch;
2. **waiting for another rank** (data-parallel runs): the exposed *wait* for the rank that arrives
   last (NCCL's kernels spinning until it comes: a straggler, or ranks taking turns; where the
   ranks' untraced own work names a straggler, this rank's untraced wait for it, on the GPU or on
   the CPU) at least ``COMM_SHARE`` of the step and more than the exposed transfer — however long
   this rank's own work, its step waits for that rank; else **communication-bound**: the collectives' exposed
   *transfer* — the data's movement, from the last rank's arrival on, with no computation kernel
   beside it (matched across the ranks' windows: ``gpudash.engine.comm_split``; one rank's window:
   all their exposed time; on the CPU, the untraced steps' longest collective less the wait) — at
   least ``COMM_SHARE`` of the step and its largest part
   (``parts.Parts.weighed``). Checked right after input-bound: before sync-bound (FSDP2 on 2 H200s,
   collectives exposed 10.0 of 15.6 ms, 2 syncs a step, was called sync-bound) and GPU-bound, whose
   busy time counts those kernels too (on 2 H200s a rank waiting 24 ms of its 56 ms step for a late
   rank 1, its own work 31 ms, was called host-bound);
3. **sync-bound**: the host waits for the GPU inside the step and the GPU is not kept busy — or
   it waits ``MANY_SYNCS`` times or more, busy GPU or not: waits that many come from
   data-dependent shapes (nonzero, unique, boolean masks), slow kernels themselves, and they keep
   the step from being captured or overlapped (one wait, a logged loss, does not);
4. **CPU-bound**: on the CPU (no GPU figures), a step that does not wait for input: the step's
   own arithmetic (its own *work* where no window told it from a sleep) — or, where at least
   ``OUTSIDE_SHARE`` of it (its collectives apart) is outside torch in stretches of a millisecond
   or more, the script's own work there (``OUTSIDE_TORCH``);
5. **GPU-bound**: the GPU ran kernels at least ``GPU_BUSY`` of the step — of the untraced step
   where the window's steps ran slower and its kernels' time fits in it, the window's own share
   said beside (``parts.gpu_busy_untraced``; the same share for sync-bound's and host-bound's
   idle), else of the window's steps' span — or at least
   ``GPU_BUSY_QUEUED`` of it while launched work waits ``QUEUED_US`` or more in the GPU's queue
   (``Evidence.queued``: the host runs ahead; the gaps are the GPU's own) — and, where GPM reads,
   the SMs were busy at least ``SM_BUSY`` of the time: *memory* when the DRAM bandwidth share
   (GPM's, else NVML's) is at least ``MEMORY_BW``, *compute* otherwise (a bf16 step whose tensor
   cores idle, below ``TENSOR_IDLE``, says so). Busy with the SMs below ``SM_BUSY`` is **busy, SMs
   idle**: kernels too small to fill the GPU. Without GPM the rule is kernel time alone, and the
   verdict says so;
   A GPU job whose untraced steps alone were measured (it ended before its window) is **no
   profiler window**: their figures, and that only a window tells the GPU's share from the host's;
6. **host/launch-bound**: none of those: the GPU idles between kernels and its queue is empty, the
   host enqueues a step slower than the GPU runs it (on an H100: a kernel starts ~12 µs after its
   launch here, against ~50 ms in a GPU-bound step's queue). The host's time is the window's scaled
   by its slowdown (``parts.Parts``); where at least ``OUTSIDE_SHARE`` of it is outside torch, in
   stretches of a millisecond or more (a sleep, a read, logging: ``Evidence.host_gaps_ms``), the
   verdict is the script's own work (``OUTSIDE_TORCH``), not launching: CUDA graphs would not
   shorten it.

Each verdict carries its evidence and what to try next (``gpudash.diagnosis.advice``), in one line.
"""

from __future__ import annotations

from collections.abc import Callable

from gpudash.core.textfmt import plain
from gpudash.diagnosis.advice import CPU_OUTSIDE_TORCH, KNOB_ADVICE
from gpudash.diagnosis.evidence import Evidence, comm_kinds
from gpudash.diagnosis.parts import (
    COMM,
    DISTORTED_FROM,
    GPU_BUSY,
    OUTSIDE_NOTED,
    OUTSIDE_SHARE,
    WAIT,
    Parts,
    gpu_busy_untraced,
    outside_torch_ms,
)
from gpudash.diagnosis.verdict import OUTSIDE_TORCH, TENSORS_IDLE, Bound, Diagnosis

INPUT_SHARE = 0.30  # of a step spent waiting for the next batch: input-bound at or above
GPU_BUSY_QUEUED = 75.0  # % busy that is GPU-bound too when launched work queues (QUEUED_US)
MEMORY_BW = 60.0  # NVML's memory-bandwidth %: a GPU-bound step is memory-bound at or above
MANY_SYNCS = 2.0  # host waits per step: sync-bound at or above, however busy the GPU
SM_BUSY = 40.0  # GPM's SM activity %: a GPU busy with kernels is GPU-bound at or above, SM-idle below
TENSOR_IDLE = 10.0  # GPM's tensor-core activity %: a bf16 step's tensor cores idle below
COMM_SHARE = 0.25  # of a step the collectives' transfer (or wait) runs exposed: communication-bound at or above


def input_bound(e: Evidence) -> Diagnosis | None:
    """Rule 1: at least ``INPUT_SHARE`` of the step waits for the next batch."""
    if e.input_share < INPUT_SHARE:
        return None
    why = f"{100 * e.input_share:.0f}% of each step waits for the next batch ({e.input_ms:.3g} of {e.step_ms:.3g} ms)"
    return _verdict(Bound.INPUT, why)


def communication_bound(e: Evidence) -> Diagnosis | None:
    """Rule 2: the exposed wait for the last rank, at least ``COMM_SHARE`` of the step and more than
    the exposed transfer (this rank's own work, however long, is not what its step waits for); else
    the exposed transfer, at least ``COMM_SHARE`` of the step and its largest part."""
    if e.step_ms <= 0:
        return None
    parts = Parts.of(e).weighed()
    wait = parts.get(WAIT, 0.0)
    if wait >= COMM_SHARE * e.step_ms and wait > parts.get(COMM, 0.0):
        return _verdict(Bound.WAIT, _waiting(e, wait))
    largest = max(parts, key=lambda part: parts[part])
    if largest != COMM or parts[largest] < COMM_SHARE * e.step_ms:
        return None
    ms = parts[largest]
    kinds = ", ".join(f"{kind} {_ms(each)}" for kind, each in comm_kinds(e).items() if each >= 0.01 * ms)
    share = f"{100 * ms / e.step_ms:.0f}% of each step ({_ms(ms)} of {_ms(e.step_ms)} ms"
    if e.gpu_busy_pct is None:  # untraced: gloo's, on the host
        whose = "the last rank's" if e.straggler_wait_ms else "this rank's"  # its wait for a straggler apart
        return _verdict(Bound.COMM, f"its collectives take {share}, from {whose} arrival to their end)")
    what = "the collectives move data" if e.comm_transfer_exposed_ms is not None else "collectives run"
    return _verdict(  # "… 41% of each step (14.1 of 34.3 ms: all-reduce 12.0, reduce-scatter 2.1)"
        Bound.COMM, f"{what} with nothing else on the GPU {share}{': ' + kinds if kinds else ''}){_bandwidth(e)}"
    )


def _waiting(e: Evidence, ms: float) -> str:
    """The wait for the last rank, in words: for whom, where it was measured, and what the transfer
    itself takes."""
    rank = e.waited_rank
    whom = f"rank {rank}" if rank is not None else "whichever rank comes last (they take turns)"
    moved = f"; the data itself moves in {_ms(e.comm_transfer_ms)} ms" if e.comm_transfer_ms is not None else ""
    where = " with nothing else on the GPU" if e.straggler_wait_ms is None else ""  # else untraced: its steps'
    return (
        f"its collectives wait for {whom}{where} {100 * ms / e.step_ms:.0f}% of each step "
        f"({_ms(ms)} of {_ms(e.step_ms)} ms){moved}{_bandwidth(e)}"
    )


def _bandwidth(e: Evidence) -> str:
    """The collectives' bus bandwidth, and its share of the link's peak where NVML said the link."""
    if e.comm_busbw_gbps is None:
        return ""
    peak = ""
    if e.comm_link and e.comm_link_gbps:
        kind = e.comm_link.split(" ", 1)[0]
        peak = f" ({100 * e.comm_busbw_gbps / e.comm_link_gbps:.0f}% of {kind}'s {e.comm_link_gbps:,.0f} GB/s)"
    return f", {e.comm_busbw_gbps:,.0f} GB/s of bus bandwidth{peak}"


def sync_bound(e: Evidence) -> Diagnosis | None:
    """Rule 3: the host waits for the GPU inside a step that does not keep the GPU busy, or waits
    ``MANY_SYNCS`` times or more."""
    syncs, busy = e.syncs_per_step, gpu_busy_untraced(e)
    if syncs is None or syncs < 1 or (busy is not None and busy >= GPU_BUSY and syncs < MANY_SYNCS):
        return None
    idle = f", and the GPU idles {100 - busy:.0f}% of the time" if busy is not None else ""
    where = e.sync_sites.summary() if e.sync_sites is not None else ""
    why = f"the host waits for the GPU {syncs:.3g} times a step{idle}" + (f" — at {where}" if where else "")
    return _verdict(Bound.SYNC, why)


def cpu_bound(e: Evidence) -> Diagnosis | None:
    """Rule 4: on the CPU: the step's own work — its arithmetic where a window told it from the time
    outside torch, the script's own work where that is half of it or more."""
    if not e.on_cpu:
        return None
    parts = Parts.of(e)
    loop = max(e.step_ms - e.input_ms, 0.0)
    own = loop if parts.host is None else parts.host  # its collectives apart (gloo's wait is no operator)
    outside = outside_torch_ms(e, own, less=parts.collectives)
    if own > 0 and outside is not None and outside >= OUTSIDE_SHARE * own:
        why = (
            f"{_ms(outside)} of its {_ms(own)} ms a step is outside torch, in stretches of 1 ms or more "
            f"(the script's own work: a sleep, a read, logging, Python)"
        )
        return Diagnosis(Bound.CPU, why, CPU_OUTSIDE_TORCH, OUTSIDE_TORCH)  # no CUDA graph is the question
    what = "arithmetic" if outside is not None else "work"  # without a window: not told from a sleep
    collectives = f", {_ms(parts.collectives)} ms in its collectives" if parts.collectives >= 0.05 * e.step_ms else ""
    noted = ""
    if outside is not None and outside >= max(1.0, OUTSIDE_NOTED * own):
        noted = f"; {_ms(outside)} ms of it is outside torch, in stretches of 1 ms or more"
    return _verdict(
        Bound.CPU,
        f"the step's own {what} on the CPU, {e.step_ms:.3g} ms a step "
        f"({100 * e.input_share:.0f}% of it waiting for input{collectives}){noted}",
    )


def untold(e: Evidence) -> Diagnosis | None:
    """Rule 4b: a GPU job's untraced steps alone (it ended before its profiler window): what they
    measured, and that the GPU's share of the step is not known without the window."""
    if e.gpu_busy_pct is not None or e.on_cpu:
        return None
    syncs = f", {e.syncs_per_step:.3g} syncs a step" if e.syncs_per_step is not None else ""
    why = (
        f"{e.step_ms:.3g} ms a step ({100 * e.input_share:.0f}% of it waiting for input{syncs}); whether the "
        "GPU or the host bounds it, only a profiler window tells"
    )
    return _verdict(Bound.UNTOLD, why)


def gpu_bound(e: Evidence) -> Diagnosis | None:
    """Rule 5: the GPU ran kernels most of the untraced step — its collectives' kernels spinning
    while they wait for another rank left out; GPM (where it reads) says whether the SMs did."""
    busy = gpu_busy_untraced(e)
    if busy is None or not (busy >= GPU_BUSY or (e.queued and busy >= GPU_BUSY_QUEUED)):
        return None
    throttle = f"; the GPU is throttled ({e.throttled})" if e.throttled else ""
    kernels = f"kernels ran {busy:.0f}% of the time"
    slowed = e.window_slowdown
    if slowed >= DISTORTED_FROM and e.gpu_busy_pct is not None and abs(e.gpu_busy_pct - busy) >= 5.0:
        kernels += f" ({e.gpu_busy_pct:.0f}% in a window whose steps ran {slowed:.2f}× slower)"
    sm = e.sm_active_pct
    if sm is not None and sm < SM_BUSY:
        return _verdict(
            Bound.SMALL_KERNELS,
            f"{kernels} but the SMs were busy {sm:.0f}% of it (GPM): kernels too small to fill the GPU"
            f"{_delay(e, queued=e.queued)}{throttle}",
        )
    gpm = f", SMs busy {sm:.0f}% (GPM)" if sm is not None else " (no GPM figures here: judged by kernel time)"
    dram = e.dram_active_pct if e.dram_active_pct is not None else e.mem_bw_pct
    if dram is not None and dram >= MEMORY_BW:
        source = "DRAM bandwidth" if e.dram_active_pct is not None else "memory bandwidth"
        return _verdict(
            Bound.GPU_MEMORY, f"{kernels}{gpm}, {source} {dram:.0f}% busy{_delay(e, queued=True)}{throttle}"
        )
    tensor = e.tensor_active_pct
    if e.dtype in ("bf16", "fp16") and tensor is not None and tensor < TENSOR_IDLE:
        why = f"{kernels}{gpm}, yet the tensor cores idle ({tensor:.0f}%) in a {e.dtype} step{throttle}"
        return _verdict(Bound.GPU_COMPUTE, why, case=TENSORS_IDLE)
    tensor_text = f", tensor cores {tensor:.0f}%" if tensor is not None else ""
    return _verdict(Bound.GPU_COMPUTE, f"{kernels}{gpm}{tensor_text}{_delay(e, queued=True)}{throttle}")


def host_bound(e: Evidence) -> Diagnosis | None:
    """Rule 6, none of those: the GPU idles and its queue is empty; the host is slower to enqueue a step."""
    busy = gpu_busy_untraced(e)
    if busy is None:
        return None
    idle = f"; the GPU idles {100 - busy:.0f}% of the time{_delay(e, queued=False)}"
    host = Parts.of(e).host
    outside = outside_torch_ms(e, host)
    if host and outside is not None and outside >= OUTSIDE_SHARE * host:
        why = (
            f"the host spends {_ms(outside)} of its {_ms(host)} ms a step outside torch, in stretches of 1 ms or "
            f"more (the script's own work: a sleep, a read, logging, Python){idle}"
        )
        return _verdict(Bound.HOST, why, case=OUTSIDE_TORCH)
    return _verdict(Bound.HOST, _enqueue(e, host, outside) + idle)


RULES: tuple[Callable[[Evidence], Diagnosis | None], ...] = (
    input_bound,
    communication_bound,
    sync_bound,
    cpu_bound,
    untold,
    gpu_bound,
    host_bound,
)


def diagnose(e: Evidence) -> Diagnosis:
    """The first verdict of ``RULES`` on one window's evidence (with GPU figures or without, one of
    the last three gives one)."""
    return next(verdict for rule in RULES if (verdict := rule(e)) is not None)


def _verdict(bound: Bound, why: str, case: str = "") -> Diagnosis:
    """A verdict with what to try next in gpudash's words (``KNOB_ADVICE``)."""
    return Diagnosis(bound, why, KNOB_ADVICE[case or bound], case)


def _ms(v: float) -> str:
    """Milliseconds in plain notation: "12.0", "2.1", "0.34", "1,234.5"."""
    return f"{v:,.1f}" if v >= 0.95 else plain(v, 2)


def _enqueue(e: Evidence, host: float | None, outside: float | None) -> str:
    """The host's time to enqueue a step against the GPU's time for it, in words: the window's time
    scaled by its slowdown where the window ran slower ("58.7 ms (87.9 in a window whose steps ran
    1.49× slower)"), and its time outside torch from ``OUTSIDE_NOTED`` of it."""
    traced = e.host_ms_per_step
    ms = host if host is not None else traced if traced is not None else e.step_ms
    text = f"{ms:.3g} ms"
    slowed = e.window_slowdown
    if traced is not None and host is not None and slowed >= 1.05:
        text += f" ({traced:.3g} in a window whose steps ran {slowed:.2f}× slower)"
    gpu = f" whose kernels run {e.gpu_ms_per_step:.3g} ms" if e.gpu_ms_per_step is not None else ""
    noted = ""
    if host and outside is not None and outside >= max(1.0, OUTSIDE_NOTED * host):
        noted = f"; {_ms(outside)} ms of it is outside torch, in stretches of 1 ms or more"
    return f"the CPU needs {text} to enqueue a step{gpu}{noted}"


def _delay(e: Evidence, queued: bool) -> str:
    if e.launch_delay_us is None:
        return ""
    if queued:
        return f", kernels wait {_us(e.launch_delay_us)} in the GPU's queue"
    return f", a kernel starts {_us(e.launch_delay_us)} after its launch"


def _us(us: float) -> str:
    return f"{us / 1000:.3g} ms" if us >= 1000 else f"{us:.0f} µs"
