"""NVML's GPU performance monitoring (GPM; Hopper and newer), read in the NVML sampler's tick.

NVML's "utilization" is the share of time any kernel ran; GPM says what the SMs did: the share of
their time they were busy, ran tensor cores, and the DRAM bandwidth used. Each tick takes one GPM
sample per GPU (``nvmlGpmSampleGet``; under MIG, one per GPU instance: ``nvmlGpmMigSampleGet``)
into the spare of two buffers and asks ``nvmlGpmMetricsGet`` for the metrics between the previous
tick's sample and this one, then swaps them: a tick's figures cover the time since the last tick
(the first tick only primes). A metric NVML does not answer in a tick is None for that tick.

Where GPM cannot be read (a GPU before Hopper, a vGPU, no permission, an old driver or
nvidia-ml-py, a GPU lost mid-run) its figures stay None and ``reason`` says why in one line, for
``GpuInfo.gpm_unavailable``. Under MIG the whole-GPU figures are the workload's GPU instance
(``CUDA_VISIBLE_DEVICES``' first ``MIG-…`` entry) when it is on that GPU, and every instance is in
``mig()``, labelled. Never raises into the sampler; torch-free; ``nvml`` is the module it opened.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from gpudash.core.lenient import float_or_none
from gpudash.core.protocol import MIG_FIGURES, MigReading
from gpudash.host.devices import visible_devices
from gpudash.host.nvml_errors import FUNCTION_NOT_FOUND, GONE, NO_PERMISSION, NOT_SUPPORTED, error_code, is_error

WHAT = "GPM (SM, tensor and DRAM activity)"
# (GpuSample field, pynvml's name of the metric, its id in nvml.h where pynvml lacks the name)
METRICS: tuple[tuple[str, str, int], ...] = (
    ("sm_active_pct", "NVML_GPM_METRIC_SM_UTIL", 2),
    ("sm_occupancy_pct", "NVML_GPM_METRIC_SM_OCCUPANCY", 3),
    ("tensor_active_pct", "NVML_GPM_METRIC_ANY_TENSOR_UTIL", 5),
    ("dfma_active_pct", "NVML_GPM_METRIC_DFMA_TENSOR_UTIL", 6),
    ("hmma_active_pct", "NVML_GPM_METRIC_HMMA_TENSOR_UTIL", 7),
    ("dram_active_pct", "NVML_GPM_METRIC_DRAM_BW_UTIL", 10),
    ("pcie_tx_mib_s", "NVML_GPM_METRIC_PCIE_TX_PER_SEC", 20),
    ("pcie_rx_mib_s", "NVML_GPM_METRIC_PCIE_RX_PER_SEC", 21),
    ("nvlink_rx_mib_s", "NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC", 60),
    ("nvlink_tx_mib_s", "NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC", 61),
)
KEYS = tuple(key for key, _, _ in METRICS)
Figures = dict[str, float | None]
EMPTY: Figures = dict.fromkeys(KEYS)

# nvml.h values, compared by number so a fake module needs no class hierarchy
HOPPER, VGPU, MIG_ENABLED = 9, 2, 1  # NVML_DEVICE_ARCH_HOPPER, ..._VIRTUALIZATION_MODE_VGPU, ..._MIG_ENABLE


def failure(exc: BaseException, name: str) -> str:
    """Why GPM failed on GPU ``name``: the words after "GPM (…)" in ``reason``."""
    if isinstance(exc, AttributeError):
        return "needs a newer nvidia-ml-py: this pynvml has no GPM functions"
    if is_error(exc, FUNCTION_NOT_FOUND):
        return "needs a newer NVIDIA driver: this one's NVML has no GPM functions"
    if is_error(exc, NO_PERMISSION):
        return f"was refused on {name}: no permission (GPU profiling may be restricted to administrators)"
    if is_error(exc, NOT_SUPPORTED):
        return f"is not supported on {name} (NVML: Not Supported)"
    if error_code(exc) in GONE:
        return f"stopped: the GPU no longer answers ({exc or type(exc).__name__})"
    return f"failed on {name}: {exc or type(exc).__name__}"


def permanent(exc: BaseException) -> bool:
    """Asking again will not help: GPM is missing, refused, or the GPU is gone."""
    missing = is_error(exc, NOT_SUPPORTED, NO_PERMISSION, FUNCTION_NOT_FOUND)
    return isinstance(exc, AttributeError) or missing or error_code(exc) in GONE


@dataclass
class _Pair:
    """Two GPM sample buffers of one source (a GPU, or one GPU instance of it): ``bufs[0]`` holds
    the last tick's sample once ``primed``; ``bufs[1]`` takes the next."""

    bufs: list[Any]
    primed: bool = False


@dataclass
class _Gpu:
    """One GPU's GPM: its handle, why its figures are empty (None: they flow), its buffers (the
    whole GPU's; under MIG, each GPU instance's by id) and the last tick's figures."""

    index: int
    handle: Any
    name: str
    reason: str | None = None
    instances: dict[int, str] = field(default_factory=dict)  # MIG: GPU instance id -> its MIG UUID
    workload_gi: int | None = None  # MIG: the workload's GPU instance on this GPU
    pairs: dict[int | None, _Pair] = field(default_factory=dict)  # None: the whole GPU
    figures: Figures = field(default_factory=dict)
    mig: tuple[MigReading, ...] = ()


class GpmReader:
    """The GPM figures of the GPUs ``add``-ed, sampled by ``tick``; ``close`` frees the buffers.

    The caller serialises calls (the sampler holds its lock); every call but ``__init__`` is safe
    after NVML failed."""

    def __init__(self, nvml: Any, *, enabled: bool = True, visible: str | None = None) -> None:
        self.nvml = nvml
        self.enabled = enabled
        self.visible = visible if visible is not None else os.environ.get("CUDA_VISIBLE_DEVICES")
        self.gpus: dict[int, _Gpu] = {}
        self._ids = [int(getattr(nvml, name, default)) for _, name, default in METRICS]
        self._request: Any = None  # one c_nvmlGpmMetricsGet_t, reused every tick

    # -- the GPUs --------------------------------------------------------------------------------
    def add(self, gpus: Iterable[tuple[int, Any, str]]) -> None:
        """Probe each (index, handle, name) not yet known: GPM support, and MIG's instances."""
        for index, handle, name in gpus:
            if index not in self.gpus:
                gpu = _Gpu(index, handle, name)
                gpu.reason = self._probe(gpu) if self.enabled else "is off (sampling without it)"
                self.gpus[index] = gpu

    def _probe(self, gpu: _Gpu) -> str | None:
        """Why ``gpu`` gives no GPM figures (None: it does); finds its MIG instances."""
        nvml = self.nvml
        try:
            supported = int(nvml.nvmlGpmQueryDeviceSupport(gpu.handle).isSupportedDevice)
        except Exception as exc:  # noqa: BLE001 - said, not raised
            return self._unsupported(gpu) if is_error(exc, NOT_SUPPORTED) else failure(exc, gpu.name)
        if not supported:
            return self._unsupported(gpu)
        if self._mig_mode(gpu.handle):
            try:
                gpu.instances = self._instances(gpu.handle)
            except Exception as exc:  # noqa: BLE001
                return f"is read per MIG GPU instance, but {gpu.name}'s could not be listed ({exc})"
            if not gpu.instances:
                return f"has no MIG GPU instance to read on {gpu.name} (MIG is on, none is created)"
            gpu.workload_gi = self._workload_gi(gpu)
        return None

    def _unsupported(self, gpu: _Gpu) -> str:
        """NVML says no GPM on ``gpu``: a vGPU, a GPU before Hopper, or NVML's word for it."""
        nvml = self.nvml
        try:
            if int(nvml.nvmlDeviceGetVirtualizationMode(gpu.handle)) == VGPU:
                return f"is not available on a vGPU ({gpu.name})"
        except Exception:  # noqa: BLE001 - not told: not a vGPU as far as NVML says
            pass
        try:
            arch = int(nvml.nvmlDeviceGetArchitecture(gpu.handle))
        except Exception:  # noqa: BLE001
            arch = None
        if arch is not None and arch < int(getattr(nvml, "NVML_DEVICE_ARCH_HOPPER", HOPPER)):
            return f"needs a Hopper or newer GPU: {gpu.name} has none"
        return f"is not supported on {gpu.name} (NVML says so)"

    def _mig_mode(self, handle: Any) -> bool:
        try:
            current = self.nvml.nvmlDeviceGetMigMode(handle)[0]
        except Exception:  # noqa: BLE001 - no MIG on this GPU (Not Supported) or not told
            return False
        return int(current) == int(getattr(self.nvml, "NVML_DEVICE_MIG_ENABLE", MIG_ENABLED))

    def _instances(self, handle: Any) -> dict[int, str]:
        """The GPU instances of a GPU in MIG mode, by id, each with a MIG device's UUID."""
        nvml = self.nvml
        found: dict[int, str] = {}
        for i in range(int(nvml.nvmlDeviceGetMaxMigDeviceCount(handle))):
            try:
                mig = nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, i)
            except Exception:  # noqa: BLE001 - an empty slot (Not Found)
                continue
            gi = int(nvml.nvmlDeviceGetGpuInstanceId(mig))
            try:
                uuid = nvml.nvmlDeviceGetUUID(mig)
            except Exception:  # noqa: BLE001
                uuid = ""
            found.setdefault(gi, uuid.decode() if isinstance(uuid, bytes) else str(uuid))
        return dict(sorted(found.items()))

    def _workload_gi(self, gpu: _Gpu) -> int | None:
        """The GPU instance the workload runs on when CUDA_VISIBLE_DEVICES' first MIG entry is on
        ``gpu`` (``MIG-<uuid>``, or the older ``MIG-GPU-<uuid>/<gi>/<ci>``); else None."""
        entries = [e for e in visible_devices(self.visible) or [] if e.lower().startswith("mig-")]
        if not entries:
            return None
        want = entries[0].lower()
        for gi, uuid in gpu.instances.items():
            if uuid and uuid.lower() == want:
                return gi
        parts = want.split("/")
        if len(parts) == 3 and parts[0].startswith("mig-gpu-") and parts[1].isdecimal():
            parent = self._uuid(gpu.handle).lower().removeprefix("gpu-")
            if parent and parent == parts[0].removeprefix("mig-gpu-") and int(parts[1]) in gpu.instances:
                return int(parts[1])
        return None

    def _uuid(self, handle: Any) -> str:
        try:
            uuid = self.nvml.nvmlDeviceGetUUID(handle)
        except Exception:  # noqa: BLE001
            return ""
        return uuid.decode() if isinstance(uuid, bytes) else str(uuid)

    # -- every tick ------------------------------------------------------------------------------
    def tick(self) -> bool:
        """Sample every GPU and compute its figures since the last tick; True when ``reason``
        changed (a GPU stopped giving GPM)."""
        changed = False
        for gpu in self.gpus.values():
            if gpu.reason is None:
                try:
                    self._tick_gpu(gpu)
                except Exception as exc:  # noqa: BLE001 - empty this tick; for good when it will not answer
                    gpu.figures, gpu.mig = {}, ()
                    if permanent(exc):
                        gpu.reason, changed = failure(exc, f"GPU {gpu.index}"), True
                        self._free(gpu)
        return changed

    def _tick_gpu(self, gpu: _Gpu) -> None:
        """One GPU's samples this tick: the whole GPU's, or each GPU instance's under MIG."""
        if not gpu.instances:
            gpu.figures = self._step(gpu, None) or {}
            return
        readings = []
        for gi in gpu.instances:
            got = self._step(gpu, gi) or {}
            readings.append(MigReading(f"GPU {gpu.index} · GI {gi}", *(got.get(k) for k in MIG_FIGURES)))
            if gi == gpu.workload_gi:
                gpu.figures = got
        gpu.mig = tuple(readings)

    def _step(self, gpu: _Gpu, gi: int | None) -> Figures | None:
        """Take the source's sample into its spare buffer; its figures since the last one (None
        on the first); swap (not when the sample failed). Raises what NVML raises."""
        nvml = self.nvml
        pair = gpu.pairs.setdefault(gi, _Pair([]))
        while len(pair.bufs) < 2:  # each kept as it comes: ``close`` frees what was allocated
            pair.bufs.append(nvml.nvmlGpmSampleAlloc())
        if gi is None:
            nvml.nvmlGpmSampleGet(gpu.handle, pair.bufs[1])
        else:
            nvml.nvmlGpmMigSampleGet(gpu.handle, gi, pair.bufs[1])
        try:
            return self._metrics(pair.bufs[0], pair.bufs[1]) if pair.primed else None
        finally:  # the new sample is the next tick's older one, whether or not its metrics came
            pair.bufs.reverse()
            pair.primed = True

    def _metrics(self, older: Any, newer: Any) -> Figures:
        """``nvmlGpmMetricsGet`` between two samples: each metric its value, None where NVML
        answered that metric with an error."""
        nvml = self.nvml
        request = self._request
        if request is None:
            request = self._request = nvml.c_nvmlGpmMetricsGet_t()
            request.version = int(getattr(nvml, "NVML_GPM_METRICS_GET_VERSION", 1))
            request.numMetrics = len(self._ids)
            for i, metric_id in enumerate(self._ids):
                request.metrics[i].metricId = metric_id
        request.sample1, request.sample2 = older, newer
        nvml.nvmlGpmMetricsGet(request)
        got: Figures = {}
        for i, key in enumerate(KEYS):
            m = request.metrics[i]
            got[key] = float_or_none(m.value) if int(m.nvmlReturn) == 0 else None
        return got

    # -- what the sampler reads ------------------------------------------------------------------
    def figures(self, index: int | None) -> Figures:
        """GPU ``index``'s figures of the last tick (every key; None where not read)."""
        gpu = self.gpus.get(index) if index is not None else None
        return {**EMPTY, **gpu.figures} if gpu is not None else dict(EMPTY)

    def mig(self) -> tuple[MigReading, ...]:
        """Every GPU instance's figures of the last tick, labelled; () without MIG."""
        return tuple(r for gpu in self.gpus.values() for r in gpu.mig)

    @property
    def active(self) -> bool:
        """Some GPU gives GPM figures."""
        return any(gpu.reason is None for gpu in self.gpus.values())

    def reason(self, workload: int | None = None) -> str | None:
        """Why GPM figures are empty, in one line (None: every GPU's flow): each reason once, with
        the GPUs it holds for unless it holds for all; a MIG GPU whose workload instance is not
        known says so when it is ``workload``'s."""
        said: dict[str, list[int]] = {}
        for gpu in self.gpus.values():
            why = gpu.reason
            if why is None and gpu.instances and gpu.workload_gi is None and gpu.index == workload:
                why = "is read per MIG GPU instance (CUDA_VISIBLE_DEVICES names none of them: whole-GPU figures empty)"
            if why is not None:
                said.setdefault(why, []).append(gpu.index)
        if not said:
            return None
        if len(said) == 1 and len(next(iter(said.values()))) == len(self.gpus):
            return f"{WHAT} {next(iter(said))}"
        return f"{WHAT}: " + "; ".join(f"GPU {', '.join(map(str, gpus))} {why}" for why, gpus in said.items())

    def reason_for(self, index: int) -> str | None:
        """Why GPU ``index`` gives no GPM figures (None: it does, or it is not read)."""
        gpu = self.gpus.get(index)
        return None if gpu is None else gpu.reason

    # -- the end ---------------------------------------------------------------------------------
    def close(self) -> None:
        """Free every sample buffer (before ``nvmlShutdown``); a failure to free is ignored."""
        for gpu in self.gpus.values():
            self._free(gpu)
        self._request = None

    def _free(self, gpu: _Gpu) -> None:
        for pair in gpu.pairs.values():
            for buf in pair.bufs:
                try:
                    self.nvml.nvmlGpmSampleFree(buf)
                except Exception:  # noqa: BLE001 - NVML gone: nothing left to free
                    pass
        gpu.pairs.clear()
