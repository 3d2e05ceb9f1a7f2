"""A run's configuration from the options of ``gpudash [run]``, ``record``, ``diagnose`` and ``serve``:
the workload, the knobs and the GPUs checked against this machine (not torch), the recording's own
options, where its profiler windows go. Torch- and Textual-free."""

from __future__ import annotations

import argparse
import os
from typing import Any

from gpudash.arguments import argtypes
from gpudash.arguments.argtypes import UsageError, check_device
from gpudash.core.protocol import RunConfig
from gpudash.host.gpu_checks import check_gpus
from gpudash.host.gpu_selection import GpuSelectionError, gpu_indexes

# The RunConfig fields that an option gives as it is (field: the option's dest); the workload,
# the knobs and the GPUs are checked and converted first.
RUN_OPTIONS = {
    "variant": "variant",
    "batch_size": "batch_size",
    "device": "device",
    "image_size": "image_size",
    "workers": "workers",
    "seed": "seed",
    "sample_interval_s": "sample_interval",
    "gpu_interval_s": "interval",
    "watchdog_s": "watchdog",
    "max_steps": "steps",
    "nproc": "nproc",
    "nnodes": "nnodes",
    "rdzv_endpoint": "rdzv_endpoint",
    "rdzv_id": "rdzv_id",
    "peak_tflops": "peak_tflops",
}


def config_from_args(args: argparse.Namespace) -> RunConfig:
    """Check the workload, variant and device; return the run's configuration."""
    from workloads.catalog_types import WorkloadError
    from workloads.registry import family

    try:
        info = family(args.workload)
        variant = info.variant(args.variant) if args.variant else info.variant(info.default_variant)
    except WorkloadError as exc:
        raise UsageError(str(exc)) from None
    check_device(args.device, variant)
    argtypes.check_batch_limits(info, args.batch_size, args.nproc * args.nnodes)
    gpus = gpu_indexes(args.gpus) if args.gpus else None
    try:
        check_gpus(gpus)
    except GpuSelectionError as exc:
        raise UsageError(str(exc)) from None
    knobs = argtypes.knobs_from(args.knob)
    argtypes.check_parallel(args.nproc, args.nnodes, args.rdzv_endpoint, args.device)
    argtypes.check_host_budget(args.nproc, args.workers, args.device)
    argtypes.check_knobs(knobs, args.device, variant, world_size=args.nproc * args.nnodes)
    as_given = {field: getattr(args, option) for field, option in RUN_OPTIONS.items()}
    return RunConfig(workload=info.name, knobs=knobs.text(), gpus=gpus, **as_given)


def trace_dir_for(record: str) -> str:
    """Where a recording's profiler windows go: ``run.csv`` → ``run.traces/`` (stdout: ./gpudash-traces)."""
    if record == "-":
        return os.path.abspath("gpudash-traces")
    base = os.path.abspath(record)
    return (base[:-4] if base.endswith(".csv") else base) + ".traces"


def recording_options(args: argparse.Namespace) -> dict[str, Any]:
    """A headless recording's options as given (``--steps`` is in the run's config: max_steps)."""
    return {
        "duration_s": args.duration,
        "meta_path": args.meta,
        "quiet": args.quiet,
        "trace_every_s": args.trace_every,
        "trace_steps": args.trace_steps,
        "progress_every_s": args.progress_every,
        "diagnose_after_s": args.diagnose,
    }
