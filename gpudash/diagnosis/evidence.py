"""What one diagnosis window reads off a run (``Evidence``).

The window (``gpudash.engine.measure_windows.diagnose``) measures, apart from the samples:

- the wall time of a step, untraced, and how much of it the host spent waiting for the next
  batch (``input_ms``: inside the workload's input draw, the loader's queue included);
- the host-device syncs inside the steps (``syncs_per_step``; CUDA only);
- from a profiler window (CUDA only), all from that one window: the span of its steps (the first
  step marker's start to the last kernel's end), the share of it the GPU ran anything
  (``gpu_busy_pct``: kernels, copies and memsets on any stream, their union, so never over 100), the
  GPU's busy time per step, the host's time to enqueue a step (its marker's median) and the median
  launch delay (a kernel's launch call to its start: microseconds when nothing waits in the GPU's
  queue, milliseconds when the host runs ahead of a busy GPU).

and the parent may add NVML's memory-bandwidth share and throttling and, on Hopper and newer, GPM's
SM, tensor-core and DRAM activity (``sm_active_pct`` …: the share of the SMs' time they were busy,
which "a kernel ran" is not), all from the last NVML tick before the window began
(``gpudash.diagnosis.telemetry``: the configuration's steady state); the workload process adds the
step's dtype from its FLOP count. A user's job adds what it already does (``job_settings``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from gpudash.boot.gpudash_boot.sync_table import SyncTable
from gpudash.core.job_settings import settings_of
from gpudash.core.lenient import float_or_none

QUEUED_US = 1000.0  # median wait of launched work in the GPU's queue: the host runs ahead at or above


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
    comm_exposed_kinds: dict[str, float] | None = None  # ... of it, each kind's ({"all-reduce": 12.0, …})
    # matched across the ranks' windows (``gpudash.engine.comm_split``), ms a step (None: one rank's window):
    comm_transfer_ms: float | None = None  # the collectives' transfer (from the last rank's arrival to their end)
    comm_transfer_exposed_ms: float | None = None  # ... of it, with no computation beside: communication's part
    comm_transfer_kinds: dict[str, float] | None = None  # ... each kind's ({"all-reduce": 0.46, …})
    comm_wait_ms: float | None = None  # of the exposed collectives, this rank waiting for the last one (traced step)
    comm_last_rank: int | None = None  # the rank the others wait for in most of that wait (None: they take turns)
    comm_busbw_gbps: float | None = None  # the large collectives' bus bandwidth (median), GB/s
    comm_link: str | None = None  # NVML, added by the parent: the link between the GPUs and its peak one way
    comm_link_gbps: float | None = None  # ... that peak, GB/s
    comm_longest_ms: float | None = None  # untraced: a step's longest collective from this rank's arrival (mean)
    straggler_rank: int | None = None  # untraced: the rank the ranks' own work names (``ranks.own_work``) ...
    straggler_wait_ms: float | None = None  # ... and this rank's wait for it in the collectives, ms a step (0: it is)
    host_wait_ms: float | None = None  # profiler window: of the host's step, the time in calls that wait for the GPU
    host_gaps_ms: float | None = None  # ... and outside torch, in stretches of 1 ms or more (a sleep, I/O, Python)
    traced_step_ms: float | None = None  # profiler window: a step's wall time under the profiler
    job_settings: dict[str, str] | None = None  # a user's job: what it already does ({"num_workers": "0", …})
    input_dataset_ms: float | None = None  # a job's loader without workers: of input_ms, in its Dataset ...
    input_collate_ms: float | None = None  # ... and collating the batch (None: made by workers, or unknown)
    input_batch_bytes: float | None = None  # a job's batches' tensors, bytes a step: what workers hand over
    input_workers: int | None = None  # a job's DataLoader workers seen over the window ...
    input_workers_busy: float | None = None  # ... and their mean busy share of a CPU each (0–1)
    cpus: int | None = None  # a user's job: the CPUs it may run on (its affinity), where known

    @property
    def input_share(self) -> float:
        return self.input_ms / self.step_ms if self.step_ms > 0 else 0.0

    @property
    def queued(self) -> bool:
        """Launched work waits ``QUEUED_US`` or more in the GPU's queue: the host runs ahead of a busy GPU."""
        return self.launch_delay_us is not None and self.launch_delay_us >= QUEUED_US

    @property
    def on_cpu(self) -> bool:
        """No GPU figure at all — no window's and no sync count (syncs are counted on CUDA only): the
        CPU, not a GPU job whose window did not come."""
        return self.gpu_busy_pct is None and self.gpu_ms_per_step is None and self.syncs_per_step is None

    @property
    def window_slowdown(self) -> float:
        """How many times slower the profiler window's steps ran than untraced ones (1: not known)."""
        return self.traced_step_ms / self.step_ms if self.traced_step_ms and self.step_ms > 0 else 1.0

    @property
    def waited_rank(self) -> int | None:
        """The rank this rank's collectives wait for: the straggler named by the ranks' untraced own
        work where it is another, else the one the matched windows found last (None: neither)."""
        if self.straggler_rank is not None and self.straggler_wait_ms:
            return self.straggler_rank
        return self.comm_last_rank

    def as_dict(self) -> dict[str, Any]:
        """Its measured fields (the sync table as its own dict): what a recording keeps (``from_dict``)."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is not None:
                out[f.name] = value.as_dict() if isinstance(value, SyncTable) else value
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Evidence:
        """Back from ``as_dict`` (a recording's JSON: unknown fields are left out)."""
        names = {f.name for f in dataclasses.fields(cls)}
        kw = {k: v for k, v in d.items() if k in names}
        if isinstance(kw.get("sync_sites"), dict):
            kw["sync_sites"] = SyncTable.from_dict(kw["sync_sites"])
        if "job_settings" in kw:  # (an older recording's joined text: not read)
            kw["job_settings"] = settings_of(kw["job_settings"]) or None
        for name in ("comm_exposed_kinds", "comm_transfer_kinds"):
            if name in kw:
                kw[name] = _numbers(kw[name]) or None
        return cls(**kw)


def comm_kinds(e: Evidence) -> dict[str, float]:
    """Each collective kind's part of the step, largest first: its exposed transfer where the ranks'
    windows were matched (``comm_transfer_kinds``), else its exposed time (``comm_exposed_kinds``)
    (names of a-z, - and /: a hostile file's)."""
    kinds = e.comm_transfer_kinds if e.comm_transfer_exposed_ms is not None else e.comm_exposed_kinds
    each = _numbers(kinds)
    valid = {k: ms for k, ms in each.items() if k.islower() and k.replace("-", "").replace("/", "").isalpha()}
    return dict(sorted(valid.items(), key=lambda kv: kv[1], reverse=True))


def _numbers(value: Any) -> dict[str, float]:
    """A mapping's text keys with finite numbers ({} for anything else: an older recording's text)."""
    if not isinstance(value, dict):
        return {}
    return {k: ms for k, v in value.items() if isinstance(k, str) and (ms := float_or_none(v)) is not None}
