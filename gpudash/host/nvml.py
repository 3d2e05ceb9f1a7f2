"""NVML telemetry, sampled in the parent in its own thread: UI-free, never raises into callers.

Every query gives a value or ``None``. A metric the GPU does not support (NVML says "Not
Supported") is probed once and dropped; any other failure gives ``None`` for that tick only. When
NVML cannot be used at all (package missing, no driver, no GPU) the sampler says why once, in
``GpuInfo.unavailable``, and produces no samples.

Each sample is the workload's GPU (``GpuInfo.index``: the charts, the CSV's first columns) and
a ``GpuReading`` of every GPU watched (``GpuInfo.sampled``, as ``gpudash.host.gpu_selection`` picks
them); a watched GPU that stops answering reads ``None`` while the others go on. Each tick also
reads GPM (SM, tensor and DRAM activity: ``gpudash.host.gpm``) of those GPUs, where it can.

``pynvml`` comes from the ``nvidia-ml-py`` package and is imported lazily.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

from gpudash.core import faults
from gpudash.core.protocol import NVML_LOST, Event, EventKind, GpuInfo, GpuReading, GpuSample
from gpudash.host.gpm import GpmReader
from gpudash.host.gpu_selection import GpuSelectionError, choose_gpus
from gpudash.host.nvml_errors import (
    DRIVER_NOT_LOADED,
    FUNCTION_NOT_FOUND,
    GONE,
    LIBRARY_NOT_FOUND,
    NOT_SUPPORTED,
    error_code,
    is_error,
)

# Clock event ("throttle") reason bits (nvml.h nvmlClocksEventReason*).
THROTTLE_REASONS: tuple[tuple[int, str], ...] = (
    (0x1, "gpu_idle"),
    (0x2, "applications_clocks"),
    (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal"),
    (0x40, "hw_thermal"),
    (0x80, "hw_power_brake"),
    (0x100, "display_clocks"),
)


def decode_throttle(mask: int) -> str:
    """Active reasons as ``"sw_power_cap|hw_slowdown"``; ``""`` when none."""
    names = [name for bit, name in THROTTLE_REASONS if mask & bit]
    known = sum(bit for bit, _ in THROTTLE_REASONS)
    if mask & ~known:
        names.append(f"other_0x{mask & ~known:x}")
    return "|".join(names)


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _norm_uuid(uuid: str) -> str:
    uuid = uuid.strip().lower()
    return uuid[4:] if uuid.startswith("gpu-") else uuid


def gone_reason(exc: BaseException) -> str | None:
    """Why NVML will not answer again, when ``exc`` says it is gone (``GONE``); else None."""
    code = error_code(exc)
    return GONE.get(code) if code is not None else None


def _unsupported(exc: BaseException) -> bool:
    """NVML says this GPU (or driver) has no such query: asking again will not help."""
    if isinstance(exc, AttributeError):  # an nvidia-ml-py without this query
        return True
    return is_error(exc, NOT_SUPPORTED, FUNCTION_NOT_FOUND)


_READING_FIELDS = tuple(f.name for f in fields(GpuReading) if f.name != "index")
_READING_QUERIES = ("utilization", "memory", "power", "sm_clock", "temperature")  # what a GpuReading needs


NOT_AVAILABLE_U64 = 2**64 - 1  # NVML_VALUE_NOT_AVAILABLE in an unsigned long long (a process's memory)


@dataclass(frozen=True)
class NvmlProcess:
    """A process on a GPU as NVML lists it: pid (the host's), its GPU memory (None: NVML gives
    none), which lists it is on ("compute", "graphics") and NVML's name for it (None: none)."""

    pid: int
    used_memory_mib: float | None
    kinds: tuple[str, ...]
    name: str | None


@dataclass
class _WatchedGpu:
    """A GPU read for its per-GPU row: its handle, the queries it still answers, and why it
    stopped answering at all (None while it answers)."""

    handle: Any
    queries: dict[str, Callable[[Any], dict[str, Any]]]
    dropped: dict[str, str] = field(default_factory=dict)
    gone: str | None = None


def unavailable_reason(exc: BaseException) -> str:
    """One clear line for a failed ``nvmlInit``."""
    if isinstance(exc, ImportError):
        return "the nvidia-ml-py package (pynvml) is not installed"
    if is_error(exc, LIBRARY_NOT_FOUND):
        return "NVML library (libnvidia-ml) not found: no NVIDIA driver on this machine"
    if is_error(exc, DRIVER_NOT_LOADED):
        return "the NVIDIA driver is not loaded"
    return f"NVML failed to start: {exc}"


class NvmlSampler:
    """Samples one GPU every ``interval_s`` in a daemon thread; sees every GPU of the machine.

    ``start()`` initialises NVML and returns ``GpuInfo``; ``drain()`` returns the samples since the
    last call; ``latest`` is the newest one. Times are seconds since ``t0`` (``time.monotonic()``
    based, shared with the workload child). When the GPU or the driver goes away mid-run,
    ``drain()`` returns one "error" event (what="nvml"), ``info`` turns unavailable with the
    reason, and sampling stops."""

    def __init__(
        self,
        index: int | None = 0,
        interval_s: float = 0.5,
        *,
        t0: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        maxlen: int = 2000,
        gpus: Sequence[int] | None = None,
        gpm: bool = True,
    ) -> None:
        self.requested_index = index
        self.requested_gpus = gpus  # the GPUs to watch (gpudash.host.gpu_selection.choose_gpus)
        self._watched: dict[int, _WatchedGpu] = {}
        self.gpm = GpmReader(None, enabled=gpm)  # GPM's figures (False: not read; the benchmark's "off")
        self.interval_s = interval_s
        self.clock = clock
        self.t0 = clock() if t0 is None else t0
        self.info = GpuInfo(available=False, unavailable="NVML sampler not started")
        self.latest: GpuSample | None = None
        self.dropped: dict[str, str] = {}  # metric -> why it was dropped
        self._nvml: Any = None
        self._handle: Any = None
        self._uuids: list[str] = []
        self._energy0: float | None = None
        self._samples: deque[GpuSample | Event] = deque(maxlen=maxlen)
        self._ticks = 0  # samples attempted (GPUDASH_FAULT=nvml-lost@sample=N counts these)
        self._fault = faults.of_kind("nvml-lost", "nvml-gone")
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._metrics: dict[str, Callable[[Any], dict[str, Any]]] = {
            "utilization": self._utilization,
            "memory": self._memory,
            "power": self._power,
            "sm_clock": self._sm_clock,
            "temperature": self._temperature,
            "energy": self._energy,
            "throttle": self._throttle,
            "processes": self._processes,
        }

    # -- life cycle ------------------------------------------------------------------------------
    def open(self) -> GpuInfo:
        """Initialise NVML and read the machine's GPUs (no thread). Never raises."""
        try:
            import pynvml

            pynvml.nvmlInit()
        except Exception as exc:  # ImportError, NVMLError_*, OSError from a broken library
            self.info = GpuInfo(available=False, unavailable=unavailable_reason(exc))
            return self.info
        self._nvml = pynvml
        if self._fault is not None:  # test-only: every call fails from the fault's sample on
            self._nvml = faults.FaultyNvml(pynvml, self._fault, lambda: self._ticks)
        try:
            count = int(pynvml.nvmlDeviceGetCount())
            names, uuids = [], []
            for i in range(count):
                h = pynvml.nvmlDeviceGetHandleByIndex(i)
                names.append(_text(pynvml.nvmlDeviceGetName(h)))
                uuids.append(_norm_uuid(_text(self._safe(pynvml.nvmlDeviceGetUUID, h) or "")))
            driver = _text(self._safe(pynvml.nvmlSystemGetDriverVersion) or "") or None
        except Exception as exc:
            self._shutdown()
            self.info = GpuInfo(available=False, unavailable=f"NVML could not list the GPUs: {exc}")
            return self.info
        if count == 0:
            self._shutdown()
            self.info = GpuInfo(available=False, unavailable="NVML found no NVIDIA GPU", driver=driver)
            return self.info
        self._uuids = uuids
        try:
            sampled = choose_gpus(count, uuids, self.requested_gpus, os.environ.get("CUDA_VISIBLE_DEVICES"))
        except GpuSelectionError as exc:
            self._shutdown()
            self.info = GpuInfo(available=False, unavailable=str(exc), driver=driver, names=tuple(names))
            return self.info
        index = self.requested_index if self.requested_index is not None else 0
        if not 0 <= index < count:
            index = 0
        self.info = GpuInfo(available=True, driver=driver, names=tuple(names), index=index, sampled=sampled)
        self._handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        self._watched = {i: _WatchedGpu(pynvml.nvmlDeviceGetHandleByIndex(i), self._reading_queries()) for i in sampled}
        self.gpm = GpmReader(self._nvml, enabled=self.gpm.enabled)
        self._add_gpm({index: self._handle, **{i: w.handle for i, w in self._watched.items()}})
        return self.info

    def start(self) -> GpuInfo:
        """``open()`` (unless open), take a first sample, then sample every ``interval_s`` in a thread."""
        info = self.info if self._nvml is not None else self.open()
        if info.available and self._thread is None:
            self.sample()
            self._stop.clear()
            self._thread = threading.Thread(target=self._loop, name="gpudash-nvml", daemon=True)
            self._thread.start()
        return info

    def stop(self) -> None:
        """Stop the thread and shut NVML down, unless a tick is stuck in NVML (then left). Idempotent."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
            self._thread = None
        if self._lock.acquire(timeout=2.0):
            try:
                self._shutdown()
            finally:
                self._lock.release()

    def index_of(self, uuid: str) -> int | None:
        """The NVML index of the GPU with ``uuid`` (a rank's device), None where it is not here."""
        want = _norm_uuid(uuid) if uuid else ""
        return self._uuids.index(want) if want and want in self._uuids else None

    def select(self, *, index: int | None = None, uuid: str | None = None) -> bool:
        """Sample another GPU (by NVML index or UUID); True if it changed."""
        if not self.info.available or self._nvml is None:
            return False
        if uuid:
            want = _norm_uuid(uuid)
            if want not in self._uuids:
                return False
            index = self._uuids.index(want)
        if index is None or not 0 <= index < len(self.info.names) or index == self.info.index:
            return False
        with self._lock:
            try:
                self._handle = self._nvml.nvmlDeviceGetHandleByIndex(index)
            except Exception:
                return False
            self.info = replace(self.info, index=index)
            self._energy0 = None
            self._add_gpm({index: self._handle})
        return True

    def drain(self) -> list[GpuSample | Event]:
        """The samples taken since the last call, oldest first (and the event if NVML went away)."""
        with self._lock:
            out = list(self._samples)
            self._samples.clear()
        return out

    # -- sampling ---------------------------------------------------------------------------------
    def sample(self) -> GpuSample | None:
        """Take one sample now (the thread calls this every tick)."""
        if not self.info.available or self._nvml is None:
            return None
        with self._lock:
            self._ticks += 1
            values: dict[str, Any] = {}
            for name, query in list(self._metrics.items()):
                try:
                    values.update(query(self._handle))
                except Exception as exc:  # noqa: BLE001 - never raise into the thread or callers
                    gone = gone_reason(exc)
                    if gone is not None:
                        self._lose(gone)
                        return None
                    if _unsupported(exc):
                        self.dropped[name] = str(exc) or "not supported"
                        del self._metrics[name]
                    # anything else: not available this tick
            if self.gpm.tick():  # a GPU stopped giving GPM: the info says why
                self._add_gpm({})
            values.update(self.gpm.figures(self.info.index))
            per_gpu = tuple(self._reading(i, values) for i in self.info.sampled)
            s = GpuSample(time_s=self.clock() - self.t0, per_gpu=per_gpu, mig=self.gpm.mig(), **values)
            self.latest = s
            self._samples.append(s)
        return s

    def _lose(self, why: str) -> None:
        """NVML will not answer again: say so once, stop sampling (the caller holds the lock)."""
        t = self.clock() - self.t0
        message = f"NVML lost the GPU at {t:.1f} s: {why}; no GPU telemetry from here on"
        info = self.info
        self.info = GpuInfo(
            available=False, unavailable=message, driver=info.driver, names=info.names, index=info.index
        )
        self._samples.append(Event(time_s=t, kind=EventKind.ERROR, what=NVML_LOST, message=message))
        self._stop.set()  # the thread ends after this tick
        self._shutdown()

    def _loop(self) -> None:
        next_tick = self.clock() + self.interval_s
        while not self._stop.wait(max(0.0, next_tick - self.clock())):
            next_tick += self.interval_s
            if next_tick < self.clock():  # fell behind (suspended?): don't burst
                next_tick = self.clock() + self.interval_s
            self.sample()

    def _reading(self, index: int, own: dict[str, Any]) -> GpuReading:
        """GPU ``index``'s row: the workload GPU's values when it is that GPU, else its own queries."""
        values = own if index == self.info.index else {**self._ask(self._watched[index]), **self.gpm.figures(index)}
        return GpuReading(index, **{k: values.get(k) for k in _READING_FIELDS})

    def _ask(self, gpu: _WatchedGpu) -> dict[str, Any]:
        """A watched GPU's values this tick: a failing query None, one not supported dropped, a gone GPU n/a."""
        values: dict[str, Any] = {}
        for name, query in list(gpu.queries.items()) if gpu.gone is None else ():
            try:
                values.update(query(gpu.handle))
            except Exception as exc:  # noqa: BLE001 - one GPU failing never stops the others
                if _unsupported(exc):
                    gpu.dropped[name] = str(exc) or "not supported"
                    del gpu.queries[name]
                elif gone_reason(exc) is not None:
                    gpu.gone = gone_reason(exc)
                    return {}
        return values

    def _add_gpm(self, handles: dict[int, Any]) -> None:
        """Read GPM of these GPUs too (index: handle; the caller holds the lock); the info's reason."""
        self.gpm.add((i, h, self.info.names[i]) for i, h in handles.items())
        self.info = replace(self.info, gpm_unavailable=self.gpm.reason(self.info.index))

    def gpm_window(self, seconds: float) -> None:
        """GPM's two samples ``seconds`` apart, now (``watch --once``: no tick came before); blocks."""
        for wait in (0.0, seconds if self.gpm.active else 0.0):
            time.sleep(wait)
            with self._lock:
                if self._nvml is not None and self.gpm.tick():
                    self._add_gpm({})

    def _reading_queries(self) -> dict[str, Callable[[Any], dict[str, Any]]]:
        return {name: self._metrics[name] for name in _READING_QUERIES if name in self._metrics}

    # -- one query per metric (each may raise; ``sample`` decides) -------------------------------
    def _utilization(self, h: Any) -> dict[str, Any]:
        u = self._nvml.nvmlDeviceGetUtilizationRates(h)
        return {"gpu_util_pct": float(u.gpu), "mem_bw_util_pct": float(u.memory)}

    def _memory(self, h: Any) -> dict[str, Any]:
        m = self._nvml.nvmlDeviceGetMemoryInfo(h)
        return {"mem_used_mib": m.used / 2**20, "mem_total_mib": m.total / 2**20}

    def _power(self, h: Any) -> dict[str, Any]:
        return {"power_w": self._nvml.nvmlDeviceGetPowerUsage(h) / 1000.0}

    def _sm_clock(self, h: Any) -> dict[str, Any]:
        return {"sm_clock_mhz": float(self._nvml.nvmlDeviceGetClockInfo(h, self._const("NVML_CLOCK_SM", 1)))}

    def _temperature(self, h: Any) -> dict[str, Any]:
        t = self._nvml.nvmlDeviceGetTemperature(h, self._const("NVML_TEMPERATURE_GPU", 0))
        return {"temp_c": float(t)}

    def _energy(self, h: Any) -> dict[str, Any]:
        mj = float(self._nvml.nvmlDeviceGetTotalEnergyConsumption(h))
        if self._energy0 is None:
            self._energy0 = mj
        return {"energy_j": (mj - self._energy0) / 1000.0}

    def _throttle(self, h: Any) -> dict[str, Any]:
        nvml = self._nvml
        query = (
            getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
            or nvml.nvmlDeviceGetCurrentClocksThrottleReasons
        )
        return {"throttle": decode_throttle(int(query(h)))}

    def _processes(self, h: Any) -> dict[str, Any]:
        """The compute processes on the GPU (their pids), for ``gpudash.host.noise``."""
        processes = self._nvml.nvmlDeviceGetComputeRunningProcesses(h)
        return {"gpu_pids": tuple(int(p.pid) for p in processes)}

    # -- one GPU on demand (``gpudash watch``): every query now, and its processes ---------------
    @property
    def uuids(self) -> tuple[str, ...]:
        """Every GPU's UUID by index, as ``nvidia-smi -L`` prints it (``GPU-…``; "" where NVML gave none)."""
        return tuple(f"GPU-{u}" if u else "" for u in self._uuids)

    def read_gpu(self, index: int) -> tuple[dict[str, Any], dict[str, str]]:
        """GPU ``index``'s values now by the sampler's queries (not energy, not processes; GPM: the last
        tick's), and why each query that gave nothing failed: a failing query leaves its fields out."""
        values: dict[str, Any] = {}
        failed: dict[str, str] = {}
        if self._nvml is None:
            return values, {"nvml": self.info.unavailable or "NVML is not open"}
        with self._lock:
            try:
                handle = self._nvml.nvmlDeviceGetHandleByIndex(index)
            except Exception as exc:  # noqa: BLE001 - said, not raised
                return values, {"handle": str(exc) or type(exc).__name__}
            for name, query in self._metrics.items():
                if name in ("energy", "processes"):
                    continue
                try:
                    values.update(query(handle))
                except Exception as exc:  # noqa: BLE001 - this field is empty; the others stand
                    failed[name] = str(exc) or type(exc).__name__
            values.update(self.gpm.figures(index))  # the last tick's (``gpm_window`` without ticks)
        return values, failed

    def processes(self, index: int) -> tuple[list[NvmlProcess] | None, str | None]:
        """The processes on GPU ``index`` as NVML lists them (compute and graphics, one entry per
        pid) with NVML's name for each where it gives one; (None, why) when neither list answers."""
        if self._nvml is None:
            return None, self.info.unavailable or "NVML is not open"
        nvml = self._nvml
        found: dict[int, NvmlProcess] = {}
        errors: list[str] = []
        with self._lock:
            try:
                handle = nvml.nvmlDeviceGetHandleByIndex(index)
            except Exception as exc:  # noqa: BLE001
                return None, str(exc) or type(exc).__name__
            for kind, query in (
                ("compute", "nvmlDeviceGetComputeRunningProcesses"),
                ("graphics", "nvmlDeviceGetGraphicsRunningProcesses"),
            ):
                try:
                    listed = getattr(nvml, query)(handle)
                except Exception as exc:  # noqa: BLE001 - the other list may answer
                    errors.append(f"{kind}: {exc or type(exc).__name__}")
                    continue
                for p in listed:
                    pid, used = int(p.pid), getattr(p, "usedGpuMemory", None)
                    mib = used / 2**20 if isinstance(used, int) and 0 <= used < NOT_AVAILABLE_U64 else None
                    seen = found.get(pid)
                    if seen is None:
                        found[pid] = NvmlProcess(pid, mib, (kind,), self._process_name(pid))
                    else:  # on both lists: one process, its larger figure
                        most = max((m for m in (seen.used_memory_mib, mib) if m is not None), default=None)
                        found[pid] = replace(seen, used_memory_mib=most, kinds=(*seen.kinds, kind))
        if len(errors) == 2:
            return None, "; ".join(errors)
        return sorted(found.values(), key=lambda p: p.pid), None

    def _process_name(self, pid: int) -> str | None:
        """NVML's name of process ``pid`` (None where it gives none)."""
        try:
            name = _text(self._nvml.nvmlSystemGetProcessName(pid))
        except Exception:  # noqa: BLE001 - not every process is named
            return None
        return name or None

    # -- helpers -------------------------------------------------------------------------------
    def _const(self, name: str, default: int) -> int:
        return int(getattr(self._nvml, name, default))

    @staticmethod
    def _safe(fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        except Exception:
            return None

    def _shutdown(self) -> None:
        nvml, self._nvml = self._nvml, None
        self._handle = None
        self.gpm.close()  # its buffers, while NVML is up
        if nvml is not None:
            try:
                nvml.nvmlShutdown()
            except Exception:
                pass
