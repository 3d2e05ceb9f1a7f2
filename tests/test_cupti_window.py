"""A periodic window's own CUPTI recorder (``gpudash_job_cupti``): its records read at the offsets of
CUPTI's header (a record packed here field by field, as ``cupti_activity.h`` declares it), and the
trace it writes read by gpudash as a Kineto window of the same kernels is — the same busy, overlap
and exposed collectives — with what it does not record (CUDA calls) left unmeasured, not nought."""

from __future__ import annotations

import ctypes
from pathlib import Path
from typing import Any

from gpudash.engine.trace_figures import figures
from gpudash.engine.trace_read import read_bounded
from tests.helpers import boot_module

cupti = boot_module("gpudash_job_cupti")


class Kernel(ctypes.Structure):
    """CUpti_ActivityKernel10's fields up to its name (cupti_activity.h, PACKED_ALIGNMENT)."""

    _pack_ = 1
    _fields_ = [  # noqa: RUF012 - ctypes' own declaration
        ("kind", ctypes.c_uint32),
        ("cacheConfig", ctypes.c_uint8),
        ("sharedMemoryConfig", ctypes.c_uint8),
        ("registersPerThread", ctypes.c_uint16),
        ("partitionedGlobalCacheRequested", ctypes.c_uint32),
        ("partitionedGlobalCacheExecuted", ctypes.c_uint32),
        ("start", ctypes.c_uint64),
        ("end", ctypes.c_uint64),
        ("completed", ctypes.c_uint64),
        ("deviceId", ctypes.c_uint32),
        ("contextId", ctypes.c_uint32),
        ("streamId", ctypes.c_uint32),
        ("grid", ctypes.c_int32 * 3),
        ("block", ctypes.c_int32 * 3),
        ("staticSharedMemory", ctypes.c_int32),
        ("dynamicSharedMemory", ctypes.c_int32),
        ("localMemoryPerThread", ctypes.c_uint32),
        ("localMemoryTotal", ctypes.c_uint32),
        ("correlationId", ctypes.c_uint32),
        ("gridId", ctypes.c_int64),
        ("name", ctypes.c_void_p),
    ]


class Copy(ctypes.Structure):
    """CUpti_ActivityMemcpy6's leading fields."""

    _pack_ = 1
    _fields_ = [  # noqa: RUF012
        ("kind", ctypes.c_uint32),
        ("copyKind", ctypes.c_uint8),
        ("srcKind", ctypes.c_uint8),
        ("dstKind", ctypes.c_uint8),
        ("flags", ctypes.c_uint8),
        ("bytes", ctypes.c_uint64),
        ("start", ctypes.c_uint64),
        ("end", ctypes.c_uint64),
        ("deviceId", ctypes.c_uint32),
        ("contextId", ctypes.c_uint32),
        ("streamId", ctypes.c_uint32),
        ("correlationId", ctypes.c_uint32),
    ]


def kernel_record(start_ns: int, end_ns: int, stream: int, correlation: int) -> bytes:
    record = Kernel(kind=10, registersPerThread=64, start=start_ns, end=end_ns, completed=end_ns + 7)
    record.deviceId, record.contextId, record.streamId, record.correlationId = 1, 3, stream, correlation
    record.grid[:] = [80, 1, 1]
    record.localMemoryTotal, record.gridId = 99, 12345
    return bytes(record)


def test_a_kernel_record_is_read_at_cuptis_offsets() -> None:
    raw = kernel_record(2_000_500, 2_003_000, stream=7, correlation=41)
    assert len(raw) == cupti.KERNEL_NAME_AT + 8  # the name's pointer follows at its offset
    event = cupti.kernel_event(raw[: cupti.KERNEL_NAME_AT], "void gemm<bf16>()")
    assert (event["ts"], event["dur"]) == (2000.5, 2.5)  # µs, as Kineto writes them
    assert event["args"] == {"device": 1, "stream": 7, "correlation": 41}
    assert (event["cat"], event["name"], event["tid"]) == ("kernel", "void gemm<bf16>()", 7)


def test_a_copy_record_is_read_at_cuptis_offsets() -> None:
    record = Copy(kind=1, copyKind=1, bytes=77 << 20, start=5_000, end=9_000, deviceId=0, streamId=13)
    record.correlationId = 8
    event = cupti.copy_event(bytes(record))
    assert (event["cat"], event["name"], event["ts"], event["dur"]) == ("gpu_memcpy", "Memcpy HtoD", 5.0, 4.0)
    assert event["args"] == {"device": 0, "stream": 13, "correlation": 8, "bytes": 77 << 20}


def test_a_cxx_kernel_name_is_read_as_kineto_shows_it() -> None:
    names = cupti.Demangler()
    assert names(b"_ZN2at6native3addEv") == "at::native::add()"
    assert names(b"ncclDevKernel_AllReduce_Sum_bf16_RING_LL") == "ncclDevKernel_AllReduce_Sum_bf16_RING_LL"


def two_steps() -> tuple[list[dict[str, Any]], list[int]]:
    """Two steps of 10 ms on CUPTI's clock (ns): compute on stream 7, an all-reduce on stream 13
    that runs 2 ms beside compute and 1 ms alone in each step."""
    events = []
    for step, base in enumerate((1_000_000_000, 1_010_000_000)):
        compute = kernel_record(base + 1_000_000, base + 7_000_000, stream=7, correlation=10 * step + 1)
        reduce = kernel_record(base + 5_000_000, base + 8_000_000, stream=13, correlation=10 * step + 2)
        events.append(cupti.kernel_event(compute[: cupti.KERNEL_NAME_AT], "void conv<bf16>()"))
        events.append(cupti.kernel_event(reduce[: cupti.KERNEL_NAME_AT], "ncclDevKernel_AllReduce_Sum_bf16_RING_LL"))
    return events, [1_000_000_000, 1_010_000_000, 1_020_000_000]


def test_the_recorders_trace_reads_as_a_kineto_window_of_the_same_kernels(tmp_path: Path) -> None:
    events, marks = two_steps()
    path = tmp_path / "w-1-rank0.json"
    cupti.write_trace(str(path), events, marks)
    trace = read_bounded(path)
    assert (trace.steps, trace.steps_in_file) == (2, 2)
    fig = figures(trace.events, trace.steps, 20.0)
    assert fig.span_ms == 20.0 and fig.kernels_per_step == 2
    assert fig.gpu_busy_pct is not None and abs(fig.gpu_busy_pct - 70.0) < 1e-9  # 1–8 ms of each 10
    assert fig.comm_ms_per_step is not None and abs(fig.comm_ms_per_step - 3.0) < 1e-9
    assert fig.comm_exposed_ms_per_step is not None and abs(fig.comm_exposed_ms_per_step - 1.0) < 1e-9
    assert fig.overlap_pct is not None and abs(fig.overlap_pct - 100 * 2 / 7) < 1e-9
    assert fig.host_ms_per_step == 10.0
    assert fig.launch_delay_us is None and fig.host_wait_ms_per_step is None  # not recorded: not nought
