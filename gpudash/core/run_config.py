"""What starts a run: ``RunConfig``, the workload, its settings and what the parent watches.

Torch-free: the CLI builds it, the workload process is handed it.
"""

from __future__ import annotations

from dataclasses import dataclass

JOB_PREFIX = "job:"  # the workload name of a user's own job (``gpudash -- CMD``): "job:" and its script


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
    sync_sites: bool = True  # each host-device sync in the steps attributed to its line (CUDA; gpudash_boot.sync_sites)
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

    def image_size_for(self, workload: str) -> int | None:
        """The image side ``workload`` runs at in this run: ``image_size`` for the family the run
        started with, the family's own (None) after a switch to another."""
        return self.image_size if workload == self.workload else None
