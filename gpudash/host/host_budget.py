"""What a run may start on this machine, checked before the first process is spawned.

A run starts the workload process, and with ``--nproc N`` N ranks under it (each imports torch
and builds its workload), and each rank its DataLoader workers. ``check_process_caps`` counts
those processes and refuses, in one line naming the limit, a run this machine cannot hold:

- **CPUs**: ranks on the CPU (gloo) need one CPU each; a rank's loader workers are at most the
  CPUs gpudash may use (the affinity mask, as PyTorch's DataLoader advises).
- **PIDs**: every process counts against ``RLIMIT_NPROC`` (the user's processes) and the
  cgroup's ``pids.max``; what is already in use is subtracted.
- **Host memory**: each rank costs ``RANK_HOST_BYTES`` (importing torch and building a workload,
  measured by ``python -m benchmarks run rank_host_cost``: docs/bench/cpu-limits/rank-host-cost.md), against
  what the machine (or the cgroup) has available.

Torch-free, Linux's ``/proc`` and ``/sys/fs/cgroup``; where a figure cannot be read (another
system, no cgroup) that limit is not checked, and nothing else is assumed.
"""

from __future__ import annotations

import os
import resource
import tempfile
from dataclasses import dataclass
from pathlib import Path

from gpudash.core import proctree
from gpudash.core.memory_kinds import size
from workloads.limits import meminfo

# PSS of a data-parallel rank at its peak (torch imported, workload built, training): the largest of
# the four families on the CPU was 610 MiB (the rank_host_cost benchmark, 2026-11-23), rounded up.
# The launcher (the workload process) imports torch too (up to 484 MiB there) and counts as one more.
RANK_HOST_BYTES = 640 * 2**20
MEMORY_SHARE = 0.8  # ranks may take this share of the memory available (the rest: page cache, the parent)
PROCESS_MARGIN = 16  # PIDs kept free for everything else the user runs meanwhile
CGROUP = Path("/sys/fs/cgroup")


class HostBudgetError(ValueError):
    """A run this machine cannot hold: one line naming the limit."""


@dataclass(frozen=True)
class ProcessPlan:
    """The processes a run starts on this node."""

    ranks: int  # 1: no data parallelism (the workload process trains itself)
    workers_per_rank: int  # DataLoader workers each rank starts (0: none)

    @property
    def processes(self) -> int:
        """Every process: the workload process, its resource tracker, and with DDP each rank
        and its forkserver; then the loader workers."""
        ddp = self.ranks > 1
        return 2 + (2 * self.ranks if ddp else 0) + self.ranks * self.workers_per_rank

    @property
    def torch_processes(self) -> int:
        """Processes that import torch: the ranks and their launcher (or the one process)."""
        return self.ranks + 1 if self.ranks > 1 else 1


def available_cpus() -> int:
    """CPUs this process may run on: the affinity mask, lowered by a cgroup CPU quota."""
    try:
        count = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        count = os.cpu_count() or 1
    quota = _cgroup_cpu_quota()
    return max(1, min(count, quota)) if quota is not None else count


def _cgroup_cpu_quota() -> int | None:
    """Whole CPUs the tightest cgroup CPU quota allows (rounded up), or None without a quota."""
    quotas = []
    for folder in cgroup_dirs("cpu"):
        v2, quota, period = (
            _read(folder / "cpu.max"),
            _read(folder / "cpu.cfs_quota_us"),
            _read(folder / "cpu.cfs_period_us"),
        )
        if v2 is not None:
            quota, _, period = v2.partition(" ")
        if quota and period and quota.isdigit() and period.isdigit() and int(period) > 0:
            quotas.append(-(-int(quota) // int(period)))
    return min(quotas) if quotas else None


def cgroup_dirs(controller: str) -> list[Path]:
    """This process's cgroup folders for ``controller`` (``pids``, ``memory``, ``cpu``), innermost
    first up to the root of the hierarchy: cgroup v2's unified tree, or v1's per-controller one."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return []
    for line in lines:
        ident, _, rest = line.partition(":")
        controllers, _, relative = rest.partition(":")
        if ident == "0" and not controllers:  # v2 (or hybrid: the unified tree beside v1's)
            base = CGROUP if (CGROUP / "cgroup.controllers").exists() else CGROUP / "unified"
        elif controller in controllers.split(","):
            base = CGROUP / controller if (CGROUP / controller).is_dir() else CGROUP / controllers
        else:
            continue
        folder = base / relative.lstrip("/")
        if not folder.is_dir() or not any((folder / f).exists() for f in _FILES[controller]):
            continue
        found = [folder]
        while folder != base and folder.parent != folder:
            folder = folder.parent
            found.append(folder)
        return found
    return []


_FILES = {
    "pids": ("pids.max",),
    "memory": ("memory.max", "memory.limit_in_bytes"),
    "cpu": ("cpu.max", "cpu.cfs_quota_us"),
}


def pids_left() -> tuple[int, str] | None:
    """(processes that may still start, the limit that says so), the tightest of RLIMIT_NPROC and
    the cgroups' pids.max; None when nothing readable limits them."""
    found: list[tuple[int, str]] = []
    soft, _ = resource.getrlimit(resource.RLIMIT_NPROC)
    if soft != resource.RLIM_INFINITY:
        used = _user_processes()
        if used is not None:
            found.append((soft - used, f"RLIMIT_NPROC {soft} (ulimit -u), {used} in use"))
    for folder in cgroup_dirs("pids"):
        limit, current = _read(folder / "pids.max"), _read(folder / "pids.current")
        if limit and limit.isdigit() and current and current.isdigit():
            found.append((int(limit) - int(current), f"the cgroup's pids.max {limit}, {current} in use"))
    return min(found) if found else None


def _user_processes() -> int | None:
    """Threads of this user, as RLIMIT_NPROC counts them (each task counts); None when unreadable."""
    return proctree.user_threads(os.getuid())


def memory_available() -> tuple[int, str] | None:
    """(bytes a new process may still use, what they are): MemAvailable, or what the tightest
    cgroup memory limit leaves when that is less; None when neither can be read."""
    found: list[tuple[int, str]] = []
    available = meminfo("MemAvailable")
    if available is not None:
        found.append((available, "available"))
    for folder in cgroup_dirs("memory"):
        limit = _read(folder / "memory.max") or _read(folder / "memory.limit_in_bytes")
        current = _read(folder / "memory.current") or _read(folder / "memory.usage_in_bytes")
        if limit and limit.isdigit() and int(limit) < 2**60 and current and current.isdigit():
            found.append(
                (max(int(limit) - int(current), 0), f"left under the cgroup's memory limit of {size(int(limit))}")
            )
    return min(found) if found else None


def check_process_caps(plan: ProcessPlan, on_cpu: bool, workers_given: bool) -> None:
    """Raise HostBudgetError when this machine cannot hold the processes ``plan`` starts."""
    cpus = available_cpus()
    if on_cpu and plan.ranks > cpus:
        raise HostBudgetError(
            f"--nproc {plan.ranks}: each rank on the CPU needs a CPU of its own, and gpudash may use "
            f"{cpus} here (the affinity mask or the cgroup's cpu.max); give --nproc {cpus} or fewer"
        )
    if workers_given and plan.workers_per_rank > cpus:
        raise HostBudgetError(
            f"--workers {plan.workers_per_rank}: more loader workers per rank than the {cpus} CPUs "
            f"gpudash may use; give --workers {cpus} or fewer"
        )
    left = pids_left()
    if left is not None and plan.processes > left[0] - PROCESS_MARGIN:
        room = max(left[0] - PROCESS_MARGIN, 0)
        raise HostBudgetError(
            f"this run would start {plan.processes} processes ({_spelled(plan)}), and {room} may "
            f"start ({left[1]}, {PROCESS_MARGIN} kept free)"
        )
    memory = memory_available()
    need = plan.torch_processes * RANK_HOST_BYTES
    if plan.ranks > 1 and memory is not None and need > MEMORY_SHARE * memory[0]:  # one process: the memory guard
        raise HostBudgetError(
            f"--nproc {plan.ranks}: the ranks and their launcher need about {size(need)} of host "
            f"memory ({size(RANK_HOST_BYTES)} each to import torch and build the workload), "
            f"and {size(memory[0])} is {memory[1]}"
        )


def _spelled(plan: ProcessPlan) -> str:
    parts = [f"{plan.ranks} rank{'s' if plan.ranks != 1 else ''}"] if plan.ranks > 1 else ["the workload"]
    if plan.workers_per_rank:
        parts.append(
            f"{plan.workers_per_rank} loader worker{'s' if plan.workers_per_rank != 1 else ''}"
            + (" each" if plan.ranks > 1 else "")
        )
    return " and ".join(parts)


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None


# The longest temp dir under which the workload's Unix sockets fit: multiprocessing's listeners
# live at TMPDIR/pymp-XXXXXXXX/listener-XXXXXXXX (32 characters more), and a socket path holds at
# most 107 bytes (AF_UNIX). Past it, loader workers and data-parallel ranks cannot hand over their
# shared tensors: the input pipeline's loader stalled for good ("AF_UNIX path too long").
MAX_TEMP_DIR_BYTES = 107 - 32


def check_temp_dir(temp_dir: str | None = None) -> None:
    """Raise HostBudgetError when the temp dir is too long for the workload's Unix sockets."""
    path = temp_dir if temp_dir is not None else tempfile.gettempdir()
    size = len(os.fsencode(path))
    if size > MAX_TEMP_DIR_BYTES:
        raise HostBudgetError(
            f"the temp dir {path[:40]}… is {size} bytes long: the workload's Unix sockets (loader workers, "
            f"ranks) need one of at most {MAX_TEMP_DIR_BYTES}; set TMPDIR to a shorter directory, such as /tmp"
        )
