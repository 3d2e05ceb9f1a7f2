"""The wire between a job's hooks and gpudash, in one place: the environment names gpudash sets in
the job, the kinds of message each side sends, a step record's fields by name, and a profiler
window's trace path. Standard library only: the hooks import it as ``gpudash_boot.wire`` (``from .
import wire``), gpudash as ``gpudash.boot.gpudash_boot.wire``.

Each message is one JSON object a datagram, its kind under ``"k"``.
"""

from __future__ import annotations

import os

# -- the environment gpudash gives the job ------------------------------------------------------------
CHANNEL_ENV = "GPUDASH_JOB_CHANNEL"  # gpudash's datagram socket (the bootstrap runs only where it is set)
SITES_ENV = "GPUDASH_JOB_SITES"  # "1": count host-device syncs by line
END_AFTER_ENV = "GPUDASH_JOB_END_AFTER"  # --steps N: each process of the job ends at its step N's end
SET_ENV = "GPUDASH_JOB_SET"  # --set's settings applied inside the job ("num_workers=8,pin_memory=True") ...
SITE_ENV = "GPUDASH_JOB_SET_SITE"  # ... the DataLoader ones only to the loaders made at this line ("train.py:33")
WATCH_ENV = "GPUDASH_JOB_WATCH_MODEL"  # "1": the job's first step says what its model does (tune)
FAULT_ENV = "GPUDASH_JOB_FAULT"  # tests: "flops@start" or "flops@stop" makes the FLOP count raise there

# -- what a job's processes send ------------------------------------------------------------------------
PROC = "proc"  # a process of the job, as it starts (its process group)
HELLO = "hello"  # a process that imported torch: its rank, node, host, socket
WORKER = "worker"  # a DataLoader worker (or a spawned process before it steps)
FIRST = "first"  # a rank's first step: its device, optimizer, settings, how its steps are counted (``"counted"``)
COUNTING = "counting"  # the steps are counted another way from step ``"step"`` on (``"counted"``; ``"before"``)
STEPS = "steps"  # step records (``RECORD_FIELDS``), ``"s"``: a list of them
SITES = "sites"  # the sync sites' table
TRACE = "trace"  # a profiler window's trace written (or why not); also gpudash's request for one
NOTE = "note"  # one line for the user (the hooks went off, a part not timed)
FLOPS = "flops"  # the model FLOPs of a step, or why not counted
OOM = "oom"  # the job dies of an out-of-memory error: where, and what the memory held
MEMPEAK = "mempeak"  # the allocator's history of a few steps dumped (or why not); also gpudash's request for it
MEM = "mem"  # what the memory holds by kind (parameters, gradients, optimizer state, activations), the allocator
PHASE = "phase"  # an evaluation, a checkpoint, a compile between steps
COMPILE = "compile"  # dynamo's compiles since the last (function, line, reason, seconds) and its graph breaks
STACKS = "stacks"  # each thread's stack; also gpudash's request for them

# -- how a job's steps are counted (``FIRST``'s and ``COUNTING``'s ``"counted"``) -----------------------------
BY_OPTIMIZER = "optimizer"  # its optimizer's steps (torch.optim)
BY_BACKWARD = "backward"  # its backward passes, each followed by the parameters changing in place (by hand)
BY_TRACK = "track"  # its own gpudash.track() steps
HOOKS_MODULE = "gpudash_boot.hooks"  # the hooks' module in the job's process (``sys.modules``) ...
TRACKED_STEP = "tracked_step"  # ... and its function gpudash.track()'s ``step()`` calls: (samples, device)

# -- what gpudash asks of them -------------------------------------------------------------------------
END = "end"  # end the job after step ``"after"`` (a quiet exit at that step's boundary)

# -- a step record, a list in this order -------------------------------------------------------------------
RECORD_FIELDS = (
    "step",  # the optimizer step's number in this process
    "t",  # the host's monotonic clock at its boundary
    "ms",  # its time (CUDA events on a GPU; None where unknown)
    "samples",  # the batches' samples since the last step
    "tokens",
    "input_wait_s",  # inside the DataLoader's __next__
    "syncs",  # host-device syncs (None: not counted)
    "profiled",  # 1: under a profiler window or the FLOP counter (kept out of the figures)
    "train_s",  # its training seconds (None: the first step)
    "dataset_s",  # of the input wait: in the Dataset, in this process
    "collate_s",  # ... and collating
    "comm_ms",  # the longest collective since the step before, from its arrival (None: none run, or not timed)
    "batch_bytes",  # the bytes of the batches' tensors since the last step
    "phase_s",  # of the time since the last step, the job's evaluation, checkpoint, compile or other (not gpudash's)
    "new_shape",  # a compiled module's training forward at a shape not seen before in this step: 1; 2 with CUDA graphs
)
(
    STEP,
    T,
    MS,
    SAMPLES,
    TOKENS,
    WAIT,
    SYNCS,
    PROFILED,
    TRAIN_S,
    DATASET_S,
    COLLATE_S,
    COMM_MS,
    BATCH_BYTES,
    PHASE_S,
    NEW_SHAPE,
) = range(len(RECORD_FIELDS))


def trace_path(folder: str, name: str, rank: int) -> str:
    """Where a rank writes its trace of the window gpudash named ``name``."""
    return os.path.join(folder, f"{name}-rank{rank}.json")
