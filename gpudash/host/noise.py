"""What makes a measurement noisy, sampled in the parent: one line of reasons, or ``""`` when quiet.

A throughput figure measured while something else competes for the machine is not a property of
the configuration. ``NoiseProbe.read`` looks, at most once a ``interval_s``, at four things and
names each that crosses its threshold (the constants below; docs/measuring.md):

- **host load**: CPU time spent by processes other than gpudash and its workload on the CPUs
  gpudash may run on (``/proc/stat``'s per-CPU lines for the affinity mask, less the workload
  group's and gpudash's own time from ``/proc/PID/stat``);
- **starved**: the workload's processes waiting on a run queue for a CPU
  (``/proc/PID/schedstat``'s run delay of each process's main thread, the one that runs the
  step), as a share of the wall time;
- **GPU shared**: compute processes on the workload's GPU that are not the
  workload's (NVML's process list, read by the sampler into ``GpuSample.gpu_pids``). In a
  container NVML may name processes by the host's pids, none of which are the workload's;
  then all but one process on the GPU count as others;
- **throttled**: NVML clock-event reasons that lower the clocks for reasons outside the
  configuration (thermal, hardware slowdown, the power brake). The software power cap is not
  counted: it is how the configuration's own power draw sets the clock.

Without ``/proc`` (not Linux) only the GPU reasons are read. Torch-free and Textual-free.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gpudash.core.protocol import GpuSample

# A reason is named when its figure crosses these; documented in docs/measuring.md.
OTHERS_MIN_CPUS = 0.5  # host load: others use at least this many CPUs...
OTHERS_MIN_SHARE = 0.25  # ...and at least this share of the CPUs gpudash may use
STARVED_SHARE = 0.05  # a workload process waited for a CPU this share of the wall time
NOISY_THROTTLE = frozenset({"hw_slowdown", "sw_thermal", "hw_thermal", "hw_power_brake"})
INTERVAL_S = 1.0


@dataclass
class _Counters:
    """One reading of the kernel's counters (seconds)."""

    wall: float
    busy: float | None  # CPU time spent on the usable CPUs, by everyone
    own: dict[int, float] = field(default_factory=dict)  # pid -> CPU time (gpudash and the workload)
    waited: dict[int, float] = field(default_factory=dict)  # workload pid -> run-queue wait


class NoiseProbe:
    """Reads the machine's competition for the workload; ``read`` gives the current reasons."""

    def __init__(
        self,
        *,
        proc: str | os.PathLike[str] = "/proc",
        cpus: Sequence[int] | None = None,
        own_pid: int | None = None,
        clock: Callable[[], float] = time.monotonic,
        interval_s: float = INTERVAL_S,
    ) -> None:
        self.proc = Path(proc)
        self.cpus = tuple(cpus) if cpus is not None else _affinity()
        self.own_pid = own_pid if own_pid is not None else os.getpid()
        self.clock = clock
        self.interval_s = interval_s
        self.tick_s = 1.0 / (os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100)
        self.reasons = ""  # the latest reading
        self._last: _Counters | None = None

    def read(self, workload: Callable[[], Sequence[int]], gpu: GpuSample | None = None) -> str:
        """The reasons the measurement is noisy now, each "kind: detail", ``"; "``-joined (``""``: quiet).
        ``workload()``: the workload's processes (its group). Rereads the counters at most once
        per ``interval_s``; in between the last reading is returned."""
        now = self.clock()
        if self._last is not None and now - self._last.wall < self.interval_s:
            return self.reasons
        members = workload()
        counters = self._counters(now, members)
        cpu_reasons = self._cpu_reasons(self._last, counters, members) if self._last is not None else []
        self._last = counters
        self.reasons = "; ".join([*cpu_reasons, *gpu_reasons(gpu, members)])
        return self.reasons

    # -- the CPU side ------------------------------------------------------------------------------
    def _counters(self, now: float, members: Sequence[int]) -> _Counters:
        own = {pid: t for pid in {self.own_pid, *members} if (t := self._cpu_time(pid)) is not None}
        waited = {pid: w for pid in members if (w := self._run_delay(pid)) is not None}
        return _Counters(wall=now, busy=self._busy(), own=own, waited=waited)

    def _cpu_reasons(self, before: _Counters, after: _Counters, members: Sequence[int]) -> list[str]:
        wall = after.wall - before.wall
        if wall <= 0:
            return []
        reasons = []
        if before.busy is not None and after.busy is not None and self.cpus:
            own = sum(t - before.own[pid] for pid, t in after.own.items() if pid in before.own)
            others = max(0.0, (after.busy - before.busy) - own) / wall
            if others >= OTHERS_MIN_CPUS and others >= OTHERS_MIN_SHARE * len(self.cpus):
                reasons.append(f"host load: other processes kept {others:.1f} of {len(self.cpus)} CPUs busy")
        waits = {pid: (w - before.waited[pid]) / wall for pid, w in after.waited.items() if pid in before.waited}
        if waits and (worst := max(waits.values())) >= STARVED_SHARE:
            reasons.append(f"starved: the workload waited for a CPU {worst:.0%} of the time")
        return reasons

    def _busy(self) -> float | None:
        """CPU seconds spent (not idle, not waiting for I/O) on the usable CPUs since boot."""
        try:
            lines = (self.proc / "stat").read_text().splitlines()
        except OSError:
            return None
        wanted = {f"cpu{i}" for i in self.cpus}
        total = 0
        for line in lines:
            parts = line.split()
            if parts and parts[0] in wanted and len(parts) >= 9:
                user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in parts[1:9])
                total += user + nice + system + irq + softirq + steal
        return total * self.tick_s

    def _cpu_time(self, pid: int) -> float | None:
        """A process's CPU seconds, every thread (``/proc/PID/stat``'s utime + stime)."""
        try:
            stat = (self.proc / str(pid) / "stat").read_bytes()
        except OSError:
            return None
        fields = stat.rsplit(b")", 1)[-1].split()  # after the command name, which may hold spaces
        try:
            return (int(fields[11]) + int(fields[12])) * self.tick_s
        except (IndexError, ValueError):
            return None

    def _run_delay(self, pid: int) -> float | None:
        """Seconds a process's main thread waited on a run queue (``/proc/PID/schedstat``)."""
        try:
            parts = (self.proc / str(pid) / "schedstat").read_text().split()
            return int(parts[1]) / 1e9
        except (OSError, IndexError, ValueError):
            return None


def gpu_reasons(gpu: GpuSample | None, members: Sequence[int]) -> list[str]:
    """The GPU's share of the reasons: other compute processes on it, and throttling."""
    if gpu is None:
        return []
    reasons = []
    if gpu.gpu_pids:
        mine = set(members)
        others = [pid for pid in gpu.gpu_pids if pid not in mine]
        if len(others) == len(gpu.gpu_pids):  # none is the workload's: another pid namespace
            others = others[1:]
        if others:
            n = len(others)
            reasons.append(f"GPU shared: {n} other process{'es' if n > 1 else ''} on the workload's GPU")
    throttled = sorted(set((gpu.throttle or "").split("|")) & NOISY_THROTTLE)
    if throttled:
        reasons.append("GPU throttled: " + ", ".join(throttled))
    return reasons


def _affinity() -> tuple[int, ...]:
    try:
        return tuple(sorted(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return tuple(range(os.cpu_count() or 1))
