"""Every remedy's words: what a verdict says to try next, in gpudash's knobs and flags
(``KNOB_ADVICE``) or a training script's (``SCRIPT_ADVICE``: a user's job has no knobs), each
limit's remedy (``remedy_advice``), and a job's advice left without what it already does
(``for_the_job``). Torch-free."""

from __future__ import annotations

import dataclasses
import re

from gpudash.boot.gpudash_boot.sync_table import Site
from gpudash.core.lenient import float_or_none
from gpudash.diagnosis.evidence import Evidence
from gpudash.diagnosis.parts import COMM, GPU, HOST, INPUT, OUTSIDE_SHARE, SYNCS, WAIT, Parts, outside_torch_ms
from gpudash.diagnosis.verdict import OUTSIDE_TORCH, TENSORS_IDLE, Bound, Diagnosis

DATASET_SHARE = 0.5  # a Dataset's share of the input wait from which workers are the fix ...
# ... when it is longer than this too: a worker hands each batch over (a queue, shared memory), which
# cost about 1.6 ms a batch more than making it in the loop did for an in-memory TensorDataset of 64
# rows on the 2-core machine (docs/bench/cpu-input: tune's race on tests/data/jobs/in_memory.py)
HANDOVER_MS = 1.0
WORKERS_IDLE = 0.5  # workers busy less than this share of a CPU each ...
HANDOVER_BYTES = 32e6  # ... handing over this many bytes a step or more: the wait is the hand-over, not their work
# (idle workers with small batches wait on storage or the network: more of them is the fix, as tune's climb finds)
FSDP = "fsdp"  # a communication-bound job's FSDP2 model: advice of its own
# a line that copies to the GPU (``x.to(device)``, ``x.cuda()``; not ``.to("cpu")``): where it syncs, the
# copy comes from pageable memory or waits for its stream (non_blocking=False), and the fix is a pinned,
# non-blocking copy — not keeping .item() out of the step
COPY_TO_GPU = re.compile(r"\.(?:cuda|to)\((?![^)]*['\"]cpu['\"])")
NOT_A_COPY = re.compile(
    r"\.item\(|\.cpu\(|\.numpy\(|\.tolist\(|nonzero|unique|masked_select|\.to\(\s*(?:torch\.)?(?:float|half|bfloat|int|long|bool|dtype)"
)
COPIES_SHARE = 0.5  # of the step's syncs at such lines: the sync advice is the copy's
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
    OUTSIDE_TORCH: "take the step's own work outside torch off it — a sleep, a file or network read, logging, "
    "Python per batch (py-spy dump --pid PID shows where) — into the DataLoader's workers, a background thread, "
    "or less often; CUDA graphs would not shorten it",
    Bound.WAIT: "even out the ranks' own work: the rank the others wait for (the straggler line names it) needs "
    "a faster input or less per-rank work; ranks that take turns wait for each other's jitter (host noise, "
    "a profiler window pulls them apart)",
    Bound.COMPILE: "keep the compiled function's inputs alike from call to call: mark a changing dimension dynamic "
    "(torch._dynamo.mark_dynamic) or pad to a few lengths, pass changing numbers as tensors (the compile table, "
    "key g, names each cause with its fix)",
    Bound.UNTOLD: "diagnose it with more steps (its profiler window comes after the timed ones), or record it "
    "with --trace-every S: the window tells the GPU's share of the step from the host's",
    FSDP: "overlap the all-gathers and reduce-scatters with computation: FSDP2's explicit prefetching "
    "(set_modules_to_forward_prefetch, set_modules_to_backward_prefetch), reshard_after_forward=False for the "
    "last blocks (no all-gather again in the backward), a larger batch per rank",
}
CPU_OUTSIDE_TORCH = (  # the same on the CPU, where no CUDA graph is the question
    "take the step's own work outside torch off it — a sleep, a file or network read, logging, Python per batch "
    "(py-spy dump --pid PID shows where) — into the DataLoader's workers, a background thread, or less often"
)
# What to try, in gpudash's knobs and flags: a verdict on one of its own families
KNOB_ADVICE: dict[str, str] = {
    Bound.INPUT: "make the input pipeline faster: more loader workers, pin_memory, decode or augment on the GPU",
    Bound.SYNC: "keep the step free of .item(), .cpu(), printing a tensor and data-dependent shapes "
    "(read values after the step, asynchronously); then cuda_graph applies",
    Bound.CPU: "run it on a GPU (--device cuda); on the CPU, a smaller model or batch",
    Bound.COMM: "hide them behind the backward pass: 100 MB buckets and gradient_as_bucket_view (gpudash's DDP "
    "defaults), a larger batch per rank, or fewer all-reduces (ddp_no_sync=K)",
    Bound.WAIT: "even out the ranks' own work: the rank the others wait for (the straggler line names it)",
    Bound.GPU_MEMORY: "move fewer bytes: amp=bf16 (half of them), compile (fuses elementwise kernels), channels_last",
    Bound.GPU_COMPUTE: "faster arithmetic: amp=bf16, tf32, channels_last with cudnn_benchmark for convolutions, "
    "compile",
    Bound.HOST: "launch less from Python: cuda_graph or compile=reduce-overhead, or a larger batch",
    Bound.SMALL_KERNELS: "give each kernel more work: a bigger batch, cuda_graph, or compile (fuses small kernels)",
    Bound.UNTOLD: SCRIPT_ADVICE[Bound.UNTOLD],
    Bound.COMPILE: "keep the batch size while compile is on (each new size compiles again), or try sizes with "
    "compile off",
    TENSORS_IDLE: SCRIPT_ADVICE[TENSORS_IDLE],  # the same in gpudash's words and a script's
    OUTSIDE_TORCH: SCRIPT_ADVICE[OUTSIDE_TORCH],
}
LIMIT_ADVICE = {  # each limit's remedy in gpudash's knobs (a family's)
    INPUT: "more loader workers, pin_memory, decode or augment on the GPU",
    SYNCS: "keep the step free of .item(), .cpu() and data-dependent shapes",
    HOST: "cuda_graph or compile=reduce-overhead, or a larger batch",
    GPU: "faster arithmetic: amp=bf16, tf32, channels_last with cudnn_benchmark, compile",
    COMM: "a larger batch per rank, or fewer all-reduces (ddp_no_sync=K)",
    WAIT: "even out the ranks' own work (the straggler line names the rank the others wait for)",
}


def in_script_words(d: Diagnosis) -> Diagnosis:
    """A verdict with its advice in the words of a training script (``SCRIPT_ADVICE``), not
    gpudash's knobs: a user's job (``gpudash -- CMD``) has none of them."""
    return dataclasses.replace(d, advice=SCRIPT_ADVICE.get(d.case or d.bound, d.advice))


def for_the_job(d: Diagnosis, e: Evidence) -> Diagnosis:
    """A job's verdict with its advice in a script's words, left without what the job already does
    (its training DataLoader's arguments, its backend flags, its dtype: ``Evidence.job_settings``)."""
    d = in_script_words(d)
    if d.bound == Bound.INPUT:
        return dataclasses.replace(d, advice=input_advice(e))
    if d.bound == Bound.GPU_COMPUTE and not d.case:
        return dataclasses.replace(d, advice=gpu_advice(e))
    if d.bound == Bound.COMM:
        return dataclasses.replace(d, advice=comm_advice(e))
    if d.bound == Bound.HOST and not d.case:  # launching, with work outside torch worth naming first
        return dataclasses.replace(d, advice=host_advice(e))
    if d.bound == Bound.SYNC:
        return dataclasses.replace(d, advice=sync_advice(e))
    if d.bound == Bound.CPU and d.case == OUTSIDE_TORCH:
        return dataclasses.replace(d, advice=CPU_OUTSIDE_TORCH)
    return d


def remedy_advice(limit: str, e: Evidence, script: bool) -> str:
    """What removes ``limit``'s part of the step: in a training script's words, leaving out what the
    job already does (``script``), else in gpudash's knobs."""
    if not script:
        return LIMIT_ADVICE[limit]
    if limit == INPUT:
        return input_advice(e)
    if limit == GPU:
        return gpu_advice(e)
    if limit == COMM:
        return comm_advice(e)
    if limit == WAIT:
        return SCRIPT_ADVICE[Bound.WAIT]
    if limit == HOST:
        return host_advice(e)
    return sync_advice(e)


def sync_advice(e: Evidence) -> str:
    """The syncs' remedy in a script's words: where at least ``COPIES_SHARE`` of them are at lines
    that copy to the GPU (``x.to(device)``), a pinned, non-blocking copy there (pinning left out
    where the job's loader pins already, ``non_blocking`` where the line asks it); else keeping
    values' reads out of the step."""
    table = e.sync_sites
    if table is None:
        return SCRIPT_ADVICE[Bound.SYNC]
    copies = [
        (row, row.site)
        for row in table.rows
        if row.site is not None and COPY_TO_GPU.search(text := row.site.text or "") and not NOT_A_COPY.search(text)
    ]
    if sum(table.share(row) for row, _ in copies) < COPIES_SHARE:
        return SCRIPT_ADVICE[Bound.SYNC]
    pinned = (e.job_settings or {}).get("pin_memory") == "True"
    unblocked = all("non_blocking=True" in (site.text or "") for _, site in copies)
    fixes = ([] if pinned else ["pin_memory=True in its DataLoader (or .pin_memory())"]) + (
        [] if unblocked else [".to(device, non_blocking=True)"]
    )
    where = ", ".join(dict.fromkeys(_users_line(site).where for _, site in copies))
    if not fixes:  # pinned and non-blocking already: the copy waits for its stream's work
        return SCRIPT_ADVICE[Bound.SYNC]
    return (
        f"copy the batch to the GPU without waiting for it — {' and '.join(fixes)} at {where} (a copy from "
        f"memory that is not pinned, or not asked non-blocking, waits for the GPU's queue to drain)"
    )


def _users_line(site: Site) -> Site:
    """The job's own line of a sync site: the site itself, or for a library's line the job's line
    that called into it."""
    return site.called_from if site.package and site.called_from is not None else site


def host_advice(e: Evidence) -> str:
    """The host's remedy in a script's words: its work outside torch first where that is a
    millisecond a step or more and ``OUTSIDE_SHARE`` of the host's work (where the verdict is that
    work), then launching less."""
    host = Parts.of(e).host
    outside = outside_torch_ms(e, host)
    if not host or outside is None or outside < max(1.0, OUTSIDE_SHARE * host):
        return SCRIPT_ADVICE[Bound.HOST]
    launch = "and launch less from Python (CUDA graphs or torch.compile(mode='reduce-overhead'), or a larger batch)"
    return f"{SCRIPT_ADVICE[OUTSIDE_TORCH]} ({outside:.3g} ms a step), {launch}"  # no ": " (a "then" cuts there)


def input_advice(e: Evidence) -> str:
    """The input pipeline's fixes a job does not already have, for the part of the input time they
    act on. Where the job's own process makes its batches (no workers), workers are the fix only
    for a Dataset whose ``__getitem__`` is most of the wait and longer than a worker's hand-over of
    a batch (``HANDOVER_MS``); a batch cheaper to make than to hand over is made faster by making
    less of it: fewer, larger batches, fewer objects to collate. Workers that mostly idle (busy under
    ``WORKERS_IDLE`` of a CPU each over the window) while large batches (``HANDOVER_BYTES`` a step or
    more) come are not the fix either: the wait is the batches' hand-over (``handover_advice``); idle
    workers with small batches wait on storage, and more of them is. Pinned memory: for a GPU's copies."""
    have = e.job_settings or {}
    on_cuda = not e.on_cpu
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
    idle = e.input_workers_busy is not None and e.input_workers_busy < WORKERS_IDLE
    if workers not in (None, "0") and idle and (e.input_batch_bytes or 0.0) >= HANDOVER_BYTES:
        return handover_advice(e)
    full = workers is not None and workers.isdigit() and e.cpus is not None and int(workers) >= e.cpus - 1 > 0
    steps = [f"more DataLoader workers (num_workers, now {workers})" if workers else "more DataLoader workers"]
    if full and idle:  # they wait (on storage, the network, a sleep): more of them overlap the waits, past the CPUs
        busy = f"{100 * (e.input_workers_busy or 0.0):.0f}%"
        steps = [f"more DataLoader workers (num_workers, now {workers}, each busy {busy} of a CPU: they wait on reads)"]
    elif full:  # its workers and its training loop have every CPU it may use: more would only share them
        steps = [f"cheaper samples, not more DataLoader workers ({workers} and the loop have its {e.cpus} CPUs)"]
    if on_cuda and have.get("pin_memory") != "True":  # the loader's own: what it pins, not what it was asked
        steps.append("pin_memory=True")
    if workers not in (None, "0") and have.get("persistent_workers") != "True":
        steps.append("persistent_workers=True (where it runs more than one epoch: each starts its workers anew)")
    if on_cuda:
        steps.append("decode or augment on the GPU")
    head = "make the input pipeline faster: "
    if made_here:
        head = f"the Dataset's __getitem__ is {e.input_dataset_ms:.2g} ms of the {e.input_ms:.2g} ms a step waits: "
    return head + ", ".join(steps)


def handover_advice(e: Evidence) -> str:
    """The wait of a job whose workers mostly idle: the batches' hand-over, not the workers' work."""
    size = f" of {e.input_batch_bytes / 1e6:.3g} MB a step" if e.input_batch_bytes else ""
    return (
        f"not more DataLoader workers: its {e.input_workers} are busy {e.input_workers_busy:.0%} of a CPU each, so "
        f"the {e.input_ms:.2g} ms a step waits is the batches' hand-over{size} ({handover_parts(e)}), not their "
        f"work: {fewer_bytes(e)}"
    )


def handover_parts(e: Evidence) -> str:
    """What a batch's hand-over is on the job's device: the GPU's copy only where it has one."""
    return "shared memory, the collation" if e.on_cpu else "shared memory, the pin-memory thread, the copy to the GPU"


def fewer_bytes(e: Evidence, cheaper: bool = False) -> str:
    """The fixes that hand over less a batch, on the job's device (``cheaper``: cheaper samples too)."""
    samples = ", cheaper samples" if cheaper else ""
    if e.on_cpu:
        kinds, kept = "a smaller dtype, uint8 images normalised in the step", "in the training process as one tensor"
    else:
        kinds, kept = "uint8 images normalised on the GPU, a smaller dtype", "on the GPU"
    return f"fewer bytes a batch ({kinds}){samples}, or the data kept {kept}"


def gpu_advice(e: Evidence) -> str:
    """Faster arithmetic a job does not already use."""
    have = e.job_settings or {}
    half = e.dtype in ("bf16", "fp16")
    steps = [] if half else ["bf16 autocast"]
    if have.get("tf32") != "True" and not half:
        steps.append("TF32 matmuls")
    if have.get("cudnn_benchmark") != "True":
        steps.append("channels_last with cudnn.benchmark for convolutions")
    if have.get("compiled") != "True":
        steps.append("torch.compile")
    return "faster arithmetic, where the job does not already: " + (", ".join(steps) or "a smaller model or batch")


def comm_advice(e: Evidence) -> str:
    """Ways to hide the collectives that the job's model does not already use (its DDP's settings,
    or FSDP2's, in ``Evidence.job_settings``); neither said: the generic advice."""
    have = e.job_settings or {}
    if have.get("fsdp") or not any(key.startswith("ddp_") for key in have):
        return SCRIPT_ADVICE[FSDP if have.get("fsdp") else Bound.COMM]
    fixes = []
    bucket = float_or_none(have.get("ddp_bucket_cap_mb", ""))
    grads = float_or_none(have.get("ddp_grad_mb", "")) or None  # (0: not said)
    one_bucket = grads is not None and grads <= (
        bucket or 25.0
    )  # every gradient in one bucket: larger ones change nothing
    if (bucket is None or bucket <= 25.0) and not one_bucket:  # DistributedDataParallel's default bucket_cap_mb
        fixes.append("bucket_cap_mb=100" + (f" (now {bucket:g})" if bucket is not None else ""))
    if have.get("ddp_gradient_as_bucket_view") != "True":
        fixes.append("gradient_as_bucket_view=True")
    if have.get("ddp_find_unused_parameters") == "True":
        fixes.append("find_unused_parameters=False (it walks the autograd graph every step)")
    more = "a larger batch per rank, or fewer all-reduces (accumulate gradients over K steps under no_sync())"
    if have.get("ddp_no_sync") == "True":  # it accumulates already
        more = "a larger batch per rank, or more micro-batches accumulated under no_sync() a step"
    if not fixes:
        return f"the job's DistributedDataParallel already has large buckets and gradient_as_bucket_view: {more}"
    return f"hide the all-reduce behind the backward pass: DistributedDataParallel({', '.join(fixes)}), {more}"
