"""The engine on a real GPU (marked ``gpu``: skipped without CUDA).

Run: ``pytest -q -m gpu tests/test_engine_gpu.py tests/test_nvml.py -s``
"""

from __future__ import annotations

import csv
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from gpudash.core.protocol import Control, Message
from tests.messages import present

if TYPE_CHECKING:
    from gpudash.engine.loop import StepLoop
    from workloads.base import Workload

pytestmark = pytest.mark.gpu


def _loop(family: str, variant: str, batch_size: int | None = None) -> tuple[Workload, StepLoop, list[Message]]:
    """A workload on CUDA in a step loop that keeps every message it emits (in the list returned)."""
    from gpudash.engine.loop import StepLoop
    from workloads.base import WorkloadOptions
    from workloads.factory import build

    w = build(family, "cuda", WorkloadOptions(variant=variant, batch_size=batch_size))
    got: list[Message] = []
    loop = StepLoop(w, emit=got.append, sample_interval_s=0.1)
    return w, loop, got


@pytest.mark.parametrize(
    ("family", "variant", "syncs"),
    [("encdec", "serial", 0), ("encdec", "pipelined", 0), ("sync_loss", "fixed", 0), ("sync_loss", "sync-heavy", None)],
)
def test_syncs_per_step_and_no_syncs_of_our_own(family: str, variant: str, syncs: int | None) -> None:
    from gpudash.core.protocol import Sample

    w, loop, got = _loop(family, variant)
    loop.run(steps=5)  # warm-up
    got.clear()
    loop.run(duration_s=2.0)
    samples = [m for m in got if isinstance(m, Sample) and m.syncs_per_step is not None]
    assert samples
    per_step = [present(s.syncs_per_step) for s in samples]
    print(family, variant, "syncs/step:", per_step[:5], "p50 ms:", samples[-1].step_ms_p50)
    if syncs is None:
        assert min(per_step) > 0  # the lesson: this variant makes the host wait every step
    else:
        assert max(per_step) == syncs
    # the engine's own bookkeeping (event.query, elapsed_time, pinned non-blocking loss copies,
    # samples) never synchronises: counted apart, it must be zero
    assert loop.bookkeeping_syncs == 0
    assert all(s.step_ms_p50 and s.step_ms_p50 > 0 for s in samples if s.steps_per_s > 0)
    assert samples[-1].loss is not None
    w.close()


def test_out_of_memory_at_a_huge_batch_reverts() -> None:
    """Whatever the GPU's size: fill it to ~2 GiB free, then ask for a batch that needs ~25 GB."""
    import time

    import torch

    from gpudash.core.protocol import Event, Sample, SetBatchSize, Stop

    w, loop, got = _loop("encdec", "serial", 8)
    loop.run(steps=5)  # the allocator keeps what batch 8 needs
    got.clear()
    free, _ = torch.cuda.mem_get_info()
    hog = torch.empty(max(free - 2 * 2**30, 0), dtype=torch.uint8, device="cuda")
    controls = [SetBatchSize(1024)]
    state: dict[str, int | None] = {"stop_at": None}

    def next_control(timeout: float) -> Control | None:
        if controls:
            return controls.pop()
        if state["stop_at"] is None and any(isinstance(m, Event) and m.kind == "error" for m in got):
            state["stop_at"] = loop.steps_issued + 10
        if state["stop_at"] is not None and loop.steps_issued >= state["stop_at"]:
            state["stop_at"] = 1 << 62  # one Stop, like a queue that then runs empty
            return Stop()
        return None

    loop.controls = next_control
    t = time.monotonic()
    try:
        loop.run(duration_s=60)
    finally:
        del hog
        torch.cuda.empty_cache()  # give the memory back: later tests (and their children) need it
    errors = [m for m in got if isinstance(m, Event) and m.kind == "error"]
    assert errors, "a batch of 1024 should not fit in 2 GiB"
    print(errors[0].message, f"({time.monotonic() - t:.1f} s)")
    assert "memory" in errors[0].message.lower()
    assert loop.workload.batch_size == 8
    last = [m for m in got if isinstance(m, Sample)][-1]
    assert last.batch_size == 8 and last.steps_per_s > 0
    w.close()
    torch.cuda.empty_cache()


def test_record_on_the_gpu_with_real_nvml(tmp_path: Path) -> None:
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpudash",
            "--record",
            "g.csv",
            "-w",
            "sync_loss",
            "-v",
            "fixed",
            "--device",
            "cuda",
            "--duration",
            "4",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    with (tmp_path / "g.csv").open() as f:
        rows = [r for r in csv.DictReader(f) if r["row_kind"] == "sample"]

    def column(name: str) -> list[float | None]:
        return [float(r[name]) if r[name] else None for r in rows]

    syncs = [v for v in column("syncs_per_step") if v is not None]
    assert syncs and all(v == 0 for v in syncs)
    assert any(v is not None for v in column("gpu_util_pct")) and any(v is not None for v in column("mem_total_mib"))
    assert any(v is not None for v in column("joules_per_step")) or all(v is None for v in column("energy_j"))
    # the workload's allocator: part of what NVML sees on the device (which adds the CUDA context)
    memory = zip(column("cuda_allocated_mib"), column("cuda_reserved_mib"), column("mem_used_mib"), strict=True)
    held = [(a, r, u) for a, r, u in memory if a is not None and r is not None and u is not None]
    assert held and all(allocated > 0 for allocated, _, _ in held)
    assert all(allocated <= reserved for allocated, reserved, _ in held)
    # NVML's figure is its last tick's, which can predate the step sample's allocation (a first
    # row once read 1458 MiB reserved, 1009 MiB used): compare once the ticks have caught up
    settled = held[len(held) // 2 :]
    assert all(reserved < used for _, reserved, used in settled), held
    meta = json.loads((tmp_path / "g.json").read_text())
    assert meta["gpu_name"] and meta["driver"] and meta["nvml_unavailable"] is None
    assert meta["device_name"] == meta["gpu_name"]  # NVML samples the GPU the child runs on
    for name in ("steps_per_s", "step_ms_p50", "gpu_util_pct", "power_w", "joules_per_step"):
        known = [v for v in column(name) if v is not None]
        print(name, f"n={len(known)}", f"median={statistics.median(known):.4g}" if known else "")


def test_fast_steps_timed_in_groups_count_every_step_and_time_it_as_the_wall_clock_does() -> None:
    """examples/mine.py takes about 1 ms a step: timed in groups (one event per ~25 ms), every
    issued step is counted, and the step times add up to the loop's wall-clock time."""
    import time

    from gpudash.core.protocol import Sample
    from gpudash.engine.measure import CudaStepTimer

    root = Path(__file__).resolve().parents[1]
    w, loop, got = _loop(f"{root / 'examples' / 'mine.py'}:workload", "serial", 32)
    groups: list[int] = []  # the timer's group at each sample
    timer = loop.timer
    assert isinstance(timer, CudaStepTimer)

    def emit(message: Message) -> None:
        got.append(message)
        groups.append(timer.group)

    loop.emit = emit
    loop.run(steps=50)  # warm-up
    got.clear()
    steps_before = loop.steps_done
    t = time.perf_counter()
    loop.run(steps=1500)
    wall_ms = (time.perf_counter() - t) * 1000
    samples = [m for m in got if isinstance(m, Sample)]
    assert loop.steps_done - steps_before == 1500 and samples[-1].steps == loop.steps_done  # cumulative
    assert max(groups) > 1
    assert timer.group > 1  # the run's end keeps the pace: a next run() goes on in groups
    p50 = [m.step_ms_p50 for m in samples if m.step_ms_p50]
    per_step = wall_ms / 1500
    print("wall ms/step", per_step, "p50s", p50[:6], "groups", groups[:6])
    # a group's time divided by the wrong count of steps would be off by the group's size (5-10x)
    assert p50 and all(per_step / 3 < p < 3 * per_step for p in p50[1:])
    w.close()
