"""NVML telemetry, sampled in the parent in its own thread: UI-free, never raises into callers.

Every query (``gpudash.host.nvml_queries``) gives a value or ``None``. A metric the GPU does not
support (NVML says "Not Supported") is probed once and dropped; any other failure gives ``None`` for
that tick only. When NVML cannot be used at all (package missing, no driver, no GPU) the sampler
says why once, in ``GpuInfo.unavailable``, and produces no samples.

Each sample is the workload's GPU (``GpuInfo.index``: the charts, the CSV's first columns) and
a ``GpuReading`` of every GPU watched (``GpuInfo.sampled``, as ``gpudash.host.gpu_selection`` picks
them); a watched GPU that stops answering reads ``None`` while the others go on. Each tick also
reads GPM (SM, tensor and DRAM activity: ``gpudash.host.gpm``) of those GPUs, where it can.
``gpudash watch``'s reads of one GPU on demand are ``gpudash.host.nvml_watch``'s.

``pynvml`` comes from the ``nvidia-ml-py`` package and is imported lazily.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from gpudash.core import faults
from gpudash.core.protocol import NVML_LOST, Event, EventKind, GpuInfo, GpuReading, GpuSample
from gpudash.host.gpm import GpmReader
from gpudash.host.gpu_selection import GpuSelectionError, choose_gpus
from gpudash.host.links import link_between
from gpudash.host.nvml_errors import gone_reason, is_unsupported, unavailable_reason
from gpudash.host.nvml_queries import READING_FIELDS, READING_QUERIES, NvmlQueries, Query, norm_uuid, text


@dataclass
class _WatchedGpu:
    """A GPU read for its per-GPU row: its handle, the queries it still answers, and why it
    stopped answering at all (None while it answers)."""

    handle: Any
    queries: dict[str, Query]
    dropped: dict[str, str] = field(default_factory=dict)
    gone: str | None = None


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
        self.queries = NvmlQueries()
        self.metrics = self.queries.table()  # the queries the workload's GPU still answers
        self._handle: Any = None
        self._uuids: list[str] = []
        self._samples: deque[GpuSample | Event] = deque(maxlen=maxlen)
        self._ticks = 0  # samples attempted (GPUDASH_FAULT=nvml-lost@sample=N counts these)
        self._fault = faults.of_kind("nvml-lost", "nvml-gone")
        self.lock = threading.Lock()  # held around every use of NVML after open (watch's reads too)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def nvml(self) -> Any:
        """The NVML module the queries call (a faulty wrapper under GPUDASH_FAULT); None: not open."""
        return self.queries.nvml

    # -- life cycle ------------------------------------------------------------------------------
    def open(self) -> GpuInfo:
        """Initialise NVML and read the machine's GPUs (no thread). Never raises."""
        try:
            import pynvml

            pynvml.nvmlInit()
        except Exception as exc:  # ImportError, NVMLError_*, OSError from a broken library
            self.info = GpuInfo(available=False, unavailable=unavailable_reason(exc))
            return self.info
        self.queries.nvml = pynvml
        if self._fault is not None:  # test-only: every call fails from the fault's sample on
            self.queries.nvml = faults.FaultyNvml(pynvml, self._fault, lambda: self._ticks)
        try:
            count = int(pynvml.nvmlDeviceGetCount())
            names, uuids = [], []
            for i in range(count):
                h = pynvml.nvmlDeviceGetHandleByIndex(i)
                names.append(text(pynvml.nvmlDeviceGetName(h)))
                uuids.append(norm_uuid(text(self._safe(pynvml.nvmlDeviceGetUUID, h) or "")))
            driver = text(self._safe(pynvml.nvmlSystemGetDriverVersion) or "") or None
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
        link = link_between(self.nvml, [pynvml.nvmlDeviceGetHandleByIndex(i) for i in sampled])
        self.info = GpuInfo(
            available=True,
            driver=driver,
            names=tuple(names),
            index=index,
            sampled=sampled,
            link=link.words() if link is not None else None,
            link_gbps=link.gbps if link is not None else None,
        )
        self._handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        self._watched = {i: _WatchedGpu(pynvml.nvmlDeviceGetHandleByIndex(i), self._reading_queries()) for i in sampled}
        self.gpm = GpmReader(self.nvml, enabled=self.gpm.enabled)
        self._add_gpm({index: self._handle, **{i: w.handle for i, w in self._watched.items()}})
        return self.info

    def start(self) -> GpuInfo:
        """``open()`` (unless open), take a first sample, then sample every ``interval_s`` in a thread."""
        info = self.info if self.nvml is not None else self.open()
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
        if self.lock.acquire(timeout=2.0):
            try:
                self._shutdown()
            finally:
                self.lock.release()

    def index_of(self, uuid: str) -> int | None:
        """The NVML index of the GPU with ``uuid`` (a rank's device), None where it is not here."""
        want = norm_uuid(uuid) if uuid else ""
        return self._uuids.index(want) if want and want in self._uuids else None

    @property
    def uuids(self) -> tuple[str, ...]:
        """Every GPU's UUID by index, as ``nvidia-smi -L`` prints it (``GPU-…``; "" where NVML gave none)."""
        return tuple(f"GPU-{u}" if u else "" for u in self._uuids)

    def select(self, *, index: int | None = None, uuid: str | None = None) -> bool:
        """Sample another GPU (by NVML index or UUID); True if it changed."""
        if not self.info.available or self.nvml is None:
            return False
        if uuid:
            want = norm_uuid(uuid)
            if want not in self._uuids:
                return False
            index = self._uuids.index(want)
        if index is None or not 0 <= index < len(self.info.names) or index == self.info.index:
            return False
        with self.lock:
            try:
                self._handle = self.nvml.nvmlDeviceGetHandleByIndex(index)
            except Exception:
                return False
            self.info = replace(self.info, index=index)
            self.queries.energy0 = None
            self._add_gpm({index: self._handle})
        return True

    def drain(self) -> list[GpuSample | Event]:
        """The samples taken since the last call, oldest first (and the event if NVML went away)."""
        with self.lock:
            out = list(self._samples)
            self._samples.clear()
        return out

    # -- sampling ---------------------------------------------------------------------------------
    def sample(self) -> GpuSample | None:
        """Take one sample now (the thread calls this every tick)."""
        if not self.info.available or self.nvml is None:
            return None
        with self.lock:
            self._ticks += 1
            values: dict[str, Any] = {}
            for name, query in list(self.metrics.items()):
                try:
                    values.update(query(self._handle))
                except Exception as exc:  # noqa: BLE001 - never raise into the thread or callers
                    gone = gone_reason(exc)
                    if gone is not None:
                        self._lose(gone)
                        return None
                    if is_unsupported(exc):
                        self.dropped[name] = str(exc) or "not supported"
                        del self.metrics[name]
                    # anything else: not available this tick
            self.tick_gpm()
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
        return GpuReading(index, **{k: values.get(k) for k in READING_FIELDS})

    def _ask(self, gpu: _WatchedGpu) -> dict[str, Any]:
        """A watched GPU's values this tick: a failing query None, one not supported dropped, a gone GPU n/a."""
        values: dict[str, Any] = {}
        for name, query in list(gpu.queries.items()) if gpu.gone is None else ():
            try:
                values.update(query(gpu.handle))
            except Exception as exc:  # noqa: BLE001 - one GPU failing never stops the others
                if is_unsupported(exc):
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

    def tick_gpm(self) -> None:
        """GPM's tick (the caller holds ``lock``); when a GPU stopped giving GPM, the info says why."""
        if self.gpm.tick():
            self._add_gpm({})

    def _reading_queries(self) -> dict[str, Query]:
        return {name: self.metrics[name] for name in READING_QUERIES if name in self.metrics}

    # -- helpers -------------------------------------------------------------------------------
    @staticmethod
    def _safe(fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        except Exception:
            return None

    def _shutdown(self) -> None:
        nvml, self.queries.nvml = self.queries.nvml, None
        self._handle = None
        self.gpm.close()  # its buffers, while NVML is up
        if nvml is not None:
            try:
                nvml.nvmlShutdown()
            except Exception:
                pass
