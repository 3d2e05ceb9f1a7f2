"""Kept as calls N and O ran it (commit 5dfc229, then in gpudash/job/boot/); not part of gpudash: its
Python buffer callbacks can deadlock a job against the GIL (this folder's README).

A periodic profiler window's recorder on CUDA: CUPTI's activity API driven directly, through the
job's own libcupti, with the GPU's records alone — kernels, copies and memsets. Standard library
only (ctypes); the job's torch names the library.

``torch.profiler`` with ``ProfilerActivity.CUDA`` alone also has CUPTI record every runtime and
driver call (about 18,000 a step of a DDP ResNet-50, beside its 1,080 kernels): on 2 H200s (torch
2.11) its traced steps ran 1.39× untraced ones, and CUPTI's kernel records alone 1.13× (gpudash's
bench ``h200x2-issue74h``). The window's figures need the kernels (busy, overlap, collectives), not
the calls. What this recorder lacks — the launch delay, the host's waits inside CUDA calls — the
window's figures leave out (``gpudash.engine.trace_figures``: None without launch calls).

After a window CUPTI is finalized, as Kineto's ``TEARDOWN_CUPTI=1`` does (the job's own
``TEARDOWN_CUPTI=0`` keeps it attached): left attached, it slows every later launch. gpudash's
own Kineto windows tear CUPTI down after themselves, so neither finds the other's state stale.
The trace written is a Chrome trace like Kineto's (``kernel``, ``gpu_memcpy``,
``gpu_memset`` events with their stream and correlation id), which ui.perfetto.dev opens, with the
window's steps from its own marks on CUPTI's clock, which the figures leave out as they did a
Kineto GPU-only window's missing markers (the span: the GPU's first activity to its last).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import json
import os
import struct
import time
from typing import Any

MEMCPY, MEMSET, CONCURRENT_KERNEL = 1, 2, 10  # CUpti_ActivityKind (cupti_activity.h)
KINDS = (CONCURRENT_KERNEL, MEMCPY, MEMSET)
BUFFER_BYTES = 32 << 20  # one buffer holds ~150,000 kernel records: a window rarely asks for two
FLUSH_FORCED = 1
# The records' leading fields, unchanged since CUpti_ActivityKernel4 and CUpti_ActivityMemcpy /
# CUpti_ActivityMemset (PACKED_ALIGNMENT: no padding): kind, then start and end (ns) at 16 and 24.
KERNEL_PREFIX = struct.Struct("<I12xQQ8xIII12x12x8x8xIq")  # ... deviceId, contextId, streamId, correlationId, gridId
KERNEL_NAME_AT = 104  # const char *name
COPY_PREFIX = struct.Struct("<IBBBBQQQIIII")  # kind, copyKind, srcKind, dstKind, flags, bytes, start, end, ids
SET_PREFIX = struct.Struct("<IIQQQIIII")  # kind, value, bytes, start, end, deviceId, contextId, streamId, correlationId
COPY_KINDS = {
    1: "HtoD",
    2: "DtoH",
    3: "HtoA",
    4: "AtoH",
    5: "AtoA",
    6: "AtoD",
    7: "DtoA",
    8: "DtoD",
    9: "HtoH",
    10: "PtoP",
}
STEP_MARKER = "gpudash.step"
STEP_CATEGORY = "gpudash_step"  # not "user_annotation": no figure reads these

_BYTES = ctypes.POINTER(ctypes.c_uint8)
_SIZE = ctypes.POINTER(ctypes.c_size_t)
_REQUEST = ctypes.CFUNCTYPE(None, ctypes.POINTER(_BYTES), _SIZE, _SIZE)
_COMPLETE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_uint32, _BYTES, ctypes.c_size_t, ctypes.c_size_t)


def libcupti_path(torch: Any) -> str | None:
    """The job's libcupti: the one loaded, else the one beside torch's CUDA libraries; None."""
    with open("/proc/self/maps") as maps:
        loaded = sorted({line.split()[-1] for line in maps if "libcupti.so" in line})
    if loaded:
        return loaded[0]
    site = os.path.dirname(os.path.dirname(str(torch.__file__)))
    found = sorted(glob.glob(os.path.join(site, "nvidia", "**", "libcupti.so*"), recursive=True))
    return found[0] if found else None


def kernel_event(raw: bytes, name: str) -> dict[str, Any]:
    """A CONCURRENT_KERNEL record's leading bytes (``KERNEL_NAME_AT``) as a Chrome trace event."""
    _kind, start, end, device, _context, stream, correlation, _grid = KERNEL_PREFIX.unpack_from(raw)
    return _event("kernel", name, start, end, device, stream, {"correlation": correlation})


def copy_event(raw: bytes) -> dict[str, Any]:
    """A MEMCPY record's leading bytes as a Chrome trace event (Kineto's name: "Memcpy HtoD")."""
    _kind, kind, _src, _dst, _flags, size, start, end, device, _context, stream, correlation = COPY_PREFIX.unpack_from(
        raw
    )
    name = f"Memcpy {COPY_KINDS.get(kind, 'copy')}"
    return _event("gpu_memcpy", name, start, end, device, stream, {"correlation": correlation, "bytes": size})


def set_event(raw: bytes) -> dict[str, Any]:
    """A MEMSET record's leading bytes as a Chrome trace event."""
    _kind, _value, size, start, end, device, _context, stream, correlation = SET_PREFIX.unpack_from(raw)
    return _event(
        "gpu_memset", "Memset (Device)", start, end, device, stream, {"correlation": correlation, "bytes": size}
    )


def _event(cat: str, name: str, start: int, end: int, device: int, stream: int, args: dict[str, Any]) -> dict[str, Any]:
    args = {"device": device, "stream": stream, **args}
    return {
        "ph": "X",
        "cat": cat,
        "name": name,
        "pid": device,
        "tid": stream,
        "ts": start / 1e3,
        "dur": max(0, end - start) / 1e3,
        "args": args,
    }


def step_events(marks_ns: list[int]) -> list[dict[str, Any]]:
    """The window's steps on the host, from each step's start to the next (ns on CUPTI's clock), for
    the eye (Perfetto): in a category of their own, not the ``gpudash.step`` ranges of a Kineto
    window — a step boundary to the next holds the host's waits for the GPU, which this window does
    not see, and gpudash's figures would read them as the host's own work."""
    return [
        {
            "ph": "X",
            "cat": STEP_CATEGORY,
            "name": STEP_MARKER,
            "pid": "host",
            "tid": "steps",
            "ts": a / 1e3,
            "dur": (b - a) / 1e3,
        }
        for a, b in zip(marks_ns, marks_ns[1:], strict=False)
    ]


class Demangler:
    """C++ names read as Kineto shows them (libstdc++'s ``__cxa_demangle``), each once; a name it
    cannot read (a C kernel's, no libstdc++) stays as it is."""

    def __init__(self) -> None:
        self.names: dict[bytes, str] = {}
        try:
            library = ctypes.CDLL(ctypes.util.find_library("stdc++") or "libstdc++.so.6")
            self.cxx: Any = getattr(library, "__cxa_demangle")  # noqa: B009 - a dunder name in a class body is mangled
            self.cxx.restype = ctypes.c_void_p
            self.cxx.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
            self.free: Any = ctypes.CDLL(None).free
            self.free.argtypes = [ctypes.c_void_p]
        except (OSError, AttributeError):
            self.cxx = None

    def __call__(self, mangled: bytes) -> str:
        name = self.names.get(mangled)
        if name is None:
            name = self.names[mangled] = self._demangle(mangled)
        return name

    def _demangle(self, mangled: bytes) -> str:
        if self.cxx is None or not mangled.startswith(b"_Z"):
            return mangled.decode("utf-8", "replace")
        status = ctypes.c_int(0)
        out = self.cxx(mangled, None, None, ctypes.byref(status))
        if not out or status.value != 0:
            return mangled.decode("utf-8", "replace")
        try:
            return (ctypes.string_at(out) or mangled).decode("utf-8", "replace")
        finally:
            self.free(out)


class KernelTracer:
    """``start()`` then ``stop()`` (the window's events) then ``write(path, marks)``; one window at
    a time. ``marks``: ``time.monotonic()`` at each step's boundary, put on CUPTI's clock."""

    def __init__(self, path: str) -> None:
        self.lib: Any = ctypes.CDLL(path)
        self.lib.cuptiActivityGetNextRecord.argtypes = [_BYTES, ctypes.c_size_t, ctypes.POINTER(_BYTES)]
        self.lib.cuptiGetTimestamp.argtypes = [ctypes.POINTER(ctypes.c_uint64)]
        self.names = Demangler()
        self.buffers: dict[int, Any] = {}  # handed to CUPTI, by address
        self.filled: list[tuple[Any, int, int]] = []  # (buffer, its address, valid bytes) CUPTI gave back
        self.offset_ns = 0  # CUPTI's clock less monotonic's, ns
        self._request = _REQUEST(self._on_request)  # kept alive while CUPTI may call them
        self._complete = _COMPLETE(self._on_complete)

    def _on_request(self, buffer: Any, size: Any, max_records: Any) -> None:
        raw = ctypes.create_string_buffer(BUFFER_BYTES + 8)
        aligned = (ctypes.addressof(raw) + 7) & ~7
        self.buffers[aligned] = raw
        buffer[0] = ctypes.cast(aligned, _BYTES)
        size[0] = BUFFER_BYTES
        max_records[0] = 0

    def _on_complete(self, _context: Any, _stream: int, buffer: Any, _size: int, valid: int) -> None:
        address = ctypes.cast(buffer, ctypes.c_void_p).value or 0
        self.filled.append((self.buffers.pop(address, None), address, valid))

    def now_ns(self) -> int:
        stamp = ctypes.c_uint64(0)
        self.lib.cuptiGetTimestamp(ctypes.byref(stamp))
        return int(stamp.value)

    def start(self) -> None:
        """The GPU's records on; a RuntimeError where CUPTI refuses them."""
        answers = [self.lib.cuptiActivityRegisterCallbacks(self._request, self._complete)]
        answers += [self.lib.cuptiActivityEnable(kind) for kind in KINDS]
        before = time.monotonic()
        self.offset_ns = self.now_ns() - int((before + time.monotonic()) / 2 * 1e9)
        if any(answers):
            self.stop()
            raise RuntimeError(f"CUPTI refused the window's records (CUptiResult {max(answers)})")

    def stop(self, detach: bool = True) -> list[dict[str, Any]]:
        """The records off, CUPTI's buffers flushed back; the window's events, in CUPTI's order.
        ``detach``: CUPTI finalized after (left attached, it slows every later launch: a DDP
        ResNet-50 ran at 0.90× of bare between windows on 2 H200s)."""
        for kind in KINDS:
            self.lib.cuptiActivityDisable(kind)
        self.lib.cuptiActivityFlushAll(FLUSH_FORCED)
        events: list[dict[str, Any]] = []
        filled, self.filled = self.filled, []
        for _keep, address, valid in filled:
            events += self._events(ctypes.cast(address, _BYTES), valid)  # the names read before any finalize
        if detach:
            self.lib.cuptiFinalize()
        return events

    def _events(self, buffer: Any, valid: int) -> list[dict[str, Any]]:
        out = []
        record = _BYTES()
        while valid and self.lib.cuptiActivityGetNextRecord(buffer, valid, ctypes.byref(record)) == 0:
            at = ctypes.addressof(record.contents)
            kind = ctypes.c_uint32.from_address(at).value
            if kind == CONCURRENT_KERNEL:
                name = ctypes.c_char_p.from_address(at + KERNEL_NAME_AT).value or b"?"
                out.append(kernel_event(ctypes.string_at(at, KERNEL_NAME_AT), self.names(name)))
            elif kind == MEMCPY:
                out.append(copy_event(ctypes.string_at(at, COPY_PREFIX.size)))
            elif kind == MEMSET:
                out.append(set_event(ctypes.string_at(at, SET_PREFIX.size)))
        return out

    def write(self, path: str, events: list[dict[str, Any]], marks: list[float]) -> None:
        """The window's Chrome trace: its events and its steps (``marks``, monotonic s)."""
        write_trace(path, events, [int(m * 1e9) + self.offset_ns for m in marks])


def write_trace(path: str, events: list[dict[str, Any]], marks_ns: list[int]) -> None:
    """A Chrome trace of a window's GPU events and its steps (``marks_ns``, on CUPTI's clock)."""
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"traceEvents": step_events(marks_ns) + events, "gpudash": {"recorder": "cupti"}}, f)


def job_profiling(torch: Any) -> bool:
    """Whether a profiler of the job's own runs (CUPTI's records would go to one of the two):
    autograd's profiler state, which no public API reads."""
    enabled = getattr(getattr(torch._C, "_autograd", None), "_profiler_enabled", None)
    return bool(enabled()) if callable(enabled) else False


def new_tracer(torch: Any) -> KernelTracer:
    """A tracer over the job's libcupti; a RuntimeError where there is none or the job's own
    profiler runs (its records would come here)."""
    if job_profiling(torch):
        raise RuntimeError("the job's own profiler is running")
    path = libcupti_path(torch)
    if path is None:
        raise RuntimeError("no libcupti beside the job's torch")
    return KernelTracer(path)
