"""What the workload process measures and sends up: a ``Sample`` a few times a second, each
rank's ``RankSample`` in a data-parallel run, and the ``SyncSites`` of the configuration running.

Torch-free: the child builds them, the parent, the recorder and the dashboard read them.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpudash.boot.gpudash_boot.sync_table import SyncTable


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
    # ``gpudash.boot.gpudash_boot.flop_count``), the rate they make and its share of the GPU's dense peak
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


@dataclass(frozen=True)
class SyncSites:
    """The lines that make the host wait in the configuration running now
    (``gpudash.boot.gpudash_boot.sync_sites``): the child sends one after a sample when the table changed."""

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
