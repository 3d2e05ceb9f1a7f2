"""Issue 74's CUPTI probe (session 24): is a profiler window's cost on each launch Kineto's or
CUPTI's own kernel tracing? Without gpudash.

``python cupti_probe.py micro --kind K`` times a host-bound loop of tiny launches (``x.add_(1)``)
in blocks, untraced and traced alternately; ``torchrun --nproc-per-node 2 cupti_probe.py ddp --kind
K`` times windows of 5 steps of a DDP ResNet-50 (bf16, channels_last, 128 images a rank) against the
untraced steps between them. Kinds, one a process (Kineto and a raw subscriber cannot share one):

- ``kineto``: ``torch.profiler`` with ``ProfilerActivity.CUDA`` alone (gpudash's periodic window),
  ``TEARDOWN_CUPTI=1`` as gpudash sets it;
- ``raw``: the process's own libcupti driven through ctypes with one activity kind enabled,
  CONCURRENT_KERNEL (the records a window's figures need), ``cuptiFinalize`` after each window;
- ``raw+api``: that and the RUNTIME and DRIVER kinds Kineto adds (one record a launch each).

The HES hardware trace (``cuptiActivityEnableHWTrace``, Blackwell on) is asked for once before the
GPU's context exists and its answer printed (0 is CUPTI_SUCCESS; asked before ``cuInit``, it
answered 15, CUPTI_ERROR_NOT_INITIALIZED: CUPTI wants it after the driver's start). One JSON line a window/block on
rank 0: the traced and untraced ms, their ratio, and the records the window's buffers held by kind.
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import json
import os
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

KERNEL, RUNTIME, DRIVER = 10, 5, 4  # CUpti_ActivityKind (cupti_activity.h)
BUFFER_BYTES = 32 << 20
_BYTES = ctypes.POINTER(ctypes.c_uint8)
_SIZE = ctypes.POINTER(ctypes.c_size_t)
_REQUEST = ctypes.CFUNCTYPE(None, ctypes.POINTER(_BYTES), _SIZE, _SIZE)
_COMPLETE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_uint32, _BYTES, ctypes.c_size_t, ctypes.c_size_t)


def find_libcupti() -> str:
    """The libcupti this process loaded (torch's), else the one beside torch's CUDA libraries."""
    with open("/proc/self/maps") as maps:
        loaded = sorted({line.split()[-1] for line in maps if "libcupti" in line})
    if loaded:
        return loaded[0]
    import torch

    site = os.path.dirname(os.path.dirname(torch.__file__))
    found = sorted(glob.glob(os.path.join(site, "nvidia", "**", "libcupti.so*"), recursive=True))
    if not found:
        raise RuntimeError("no libcupti found")
    return found[0]


class RawCupti:
    """CUPTI's activity API through ctypes: buffers handed out from Python, their records counted by
    kind once flushed."""

    def __init__(self, kinds: tuple[int, ...]) -> None:
        self.lib = ctypes.CDLL(find_libcupti())
        self.kinds = kinds
        self.buffers: list[Any] = []
        self.records: Counter[int] = Counter()
        self._request = _REQUEST(self._on_request)
        self._complete = _COMPLETE(self._on_complete)
        self.registered = False

    def _on_request(self, buffer: Any, size: Any, max_records: Any) -> None:
        raw = ctypes.create_string_buffer(BUFFER_BYTES + 8)
        self.buffers.append(raw)
        aligned = (ctypes.addressof(raw) + 7) & ~7
        buffer[0] = ctypes.cast(aligned, ctypes.POINTER(ctypes.c_uint8))
        size[0] = BUFFER_BYTES
        max_records[0] = 0

    def _on_complete(self, _ctx: Any, _stream: int, buffer: Any, _size: int, valid: int) -> None:
        record = ctypes.POINTER(ctypes.c_uint32)()
        while valid and self.lib.cuptiActivityGetNextRecord(buffer, ctypes.c_size_t(valid), ctypes.byref(record)) == 0:
            self.records[int(record[0])] += 1  # CUpti_Activity's first field: its kind

    def start(self) -> list[int]:
        """The kinds enabled (the callbacks registered first); each call's result."""
        answers = []
        if not self.registered:
            answers.append(self.lib.cuptiActivityRegisterCallbacks(self._request, self._complete))
            self.registered = True
        answers += [self.lib.cuptiActivityEnable(kind) for kind in self.kinds]
        return answers

    def stop(self) -> dict[str, int]:
        """The kinds disabled, the buffers flushed, CUPTI detached; the records by kind."""
        for kind in self.kinds:
            self.lib.cuptiActivityDisable(kind)
        self.lib.cuptiActivityFlushAll(1)
        self.lib.cuptiFinalize()
        self.registered = False
        counted = {str(kind): n for kind, n in sorted(self.records.items())}
        self.records.clear()
        self.buffers.clear()
        return counted


def ask_hw_trace() -> int | None:
    """``cuptiActivityEnableHWTrace(1)`` asked before any context; None where this CUPTI lacks it."""
    lib = ctypes.CDLL(find_libcupti())
    if not hasattr(lib, "cuptiActivityEnableHWTrace"):
        return None
    answer = int(lib.cuptiActivityEnableHWTrace(ctypes.c_uint8(1)))
    lib.cuptiActivityEnableHWTrace(ctypes.c_uint8(0))  # the probe's windows stay as they were
    return answer


class Window:
    """One window's tracing of a kind: ``start()`` then ``stop()`` (the records by kind, or {})."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.raw = RawCupti((KERNEL, RUNTIME, DRIVER) if kind == "raw+api" else (KERNEL,)) if kind != "kineto" else None
        self.prof: Any = None

    def start(self) -> Any:
        if self.raw is not None:
            return self.raw.start()
        from torch.profiler import ProfilerActivity, profile

        self.prof = profile(activities=[ProfilerActivity.CUDA])
        self.prof.start()
        return None

    def stop(self) -> dict[str, int]:
        if self.raw is not None:
            return self.raw.stop()
        self.prof.stop()
        counted = Counter(str(e.device_type) for e in self.prof.events())
        self.prof = None
        return dict(counted)


def timed(step: Callable[[], None], count: int) -> list[float]:
    """Each of ``count`` steps' ms on the host."""
    marks = [time.perf_counter()]
    for _ in range(count):
        step()
        marks.append(time.perf_counter())
    return [(b - a) * 1e3 for a, b in zip(marks, marks[1:], strict=False)]


def window_row(kind: str, step: Callable[[], None], gap: int, traced: int, sync: Callable[[], None]) -> dict[str, Any]:
    """``gap`` untraced steps, then ``traced`` under a window of ``kind``: both medians and ratio."""
    untraced = timed(step, gap)[gap // 4 :]
    sync()
    window = Window(kind)
    started = window.start()
    steps = timed(step, traced)
    sync()
    records = window.stop()
    return {
        "kind": kind,
        "untraced_ms": round(statistics.median(untraced), 4),
        "traced_ms": [round(v, 4) for v in steps],
        "ratio": round(statistics.median(steps) / statistics.median(untraced), 4),
        "started": started,
        "records": records,
    }


def micro(kind: str, blocks: int, launches: int) -> None:
    """Blocks of ``launches`` tiny launches, untraced and traced alternately: µs a launch."""
    import torch

    hw = ask_hw_trace()
    x = torch.zeros(1, device="cuda")

    def block() -> None:
        for _ in range(launches):
            x.add_(1.0)
        torch.cuda.synchronize()

    for _ in range(3):
        block()
    for i in range(blocks):
        row = window_row(kind, block, 6, 3, torch.cuda.synchronize)
        row.update(mode="micro", block=i, hw_trace=hw, launches=launches, torch=torch.__version__)
        row["untraced_us_per_launch"] = round(row["untraced_ms"] * 1e3 / launches, 3)
        row["traced_us_per_launch"] = round(statistics.median(row["traced_ms"]) * 1e3 / launches, 3)
        print(json.dumps(row), flush=True)


def ddp(kind: str, windows: int) -> None:
    """Windows of 5 DDP ResNet-50 steps every 60 steps."""
    import torch
    import torch.distributed as dist

    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
    from benchmarks.jobs.ddp_resnet_job import join_group, resnet50_ddp, warmed_step

    if kind == "kineto":
        os.environ.setdefault("TEARDOWN_CUPTI", "1")
    hw = ask_hw_trace()
    rank, _world, device = join_group()
    net, opt = resnet50_ddp(device, bucket_view=True)
    step = warmed_step(net, opt, device)
    for i in range(windows):
        row = window_row(kind, step, 60, 5, torch.cuda.synchronize)
        if rank == 0:
            print(json.dumps(dict(row, mode="ddp", window=i, hw_trace=hw, torch=torch.__version__)), flush=True)
    torch.cuda.synchronize()
    dist.barrier()
    dist.destroy_process_group()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=("micro", "ddp"))
    p.add_argument("--kind", choices=("kineto", "raw", "raw+api"), required=True)
    p.add_argument("--blocks", type=int, default=6, help="micro: traced blocks")
    p.add_argument("--launches", type=int, default=20000, help="micro: launches a block")
    p.add_argument("--windows", type=int, default=4, help="ddp: windows")
    args = p.parse_args()
    if args.mode == "micro":
        micro(args.kind, args.blocks, args.launches)
    else:
        ddp(args.kind, args.windows)


if __name__ == "__main__":
    main()
