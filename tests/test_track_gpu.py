"""``gpudash.track()`` on a GPU: no host-device sync added to the loop (torch's sync debug mode
set to "error" around it), step times that agree with a synchronized measurement, every step
counted, syncs counted by ``count_syncs``, and NVML's columns. Skipped without CUDA."""

from __future__ import annotations

import time

import pytest

import gpudash
from gpudash.core.protocol import Event, EventKind, GpuSample, Sample
from gpudash.recording.replay import ReplaySource, read_all

pytestmark = pytest.mark.gpu

WARNING = "gpudash.track: warning:"


def model_and_step(torch, size: int = 2048, batch: int = 256):
    """A training step of a few matmuls: no sync in it (inputs made on the device, MSE loss, SGD)."""
    from torch import nn

    device = torch.device("cuda")
    model = nn.Sequential(nn.Linear(size, size), nn.ReLU(), nn.Linear(size, size)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)

    def step():
        x = torch.randn(batch, size, device=device)
        loss = nn.functional.mse_loss(model(x), x)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return loss

    return step


def read(path):
    msgs = read_all(ReplaySource(path))
    return [m for m in msgs if isinstance(m, Sample)], [m for m in msgs if isinstance(m, Event)], msgs


def test_the_tracker_adds_no_sync_and_times_the_steps_sanely(tmp_path, capfd):
    import torch

    step = model_and_step(torch)
    for _ in range(20):  # warm up: kernels, allocator
        step()
    torch.cuda.synchronize()
    n = 400
    t = time.perf_counter()
    for _ in range(n):
        step()
    torch.cuda.synchronize()
    synced_ms = (time.perf_counter() - t) * 1000 / n  # the mean step, measured with a sync at each end

    path = tmp_path / "run.csv"
    tracker = gpudash.track(path, label="mm", interval_s=0.1)
    assert tracker.device.name.startswith("cuda")
    previous = torch.cuda.get_sync_debug_mode()
    torch.cuda.set_sync_debug_mode("error")  # any sync in step(), mark() or close() raises here
    try:
        for i in range(2 * n):
            step()
            tracker.step(samples=256)
            if i == n:
                tracker.mark("second half")
        tracker.close()
    finally:
        torch.cuda.set_sync_debug_mode(previous)
    assert WARNING not in capfd.readouterr().err  # nor did the writer thread fail on a sync of its own
    samples, events, _ = read(path)
    assert samples[-1].steps == 2 * n and samples[-1].samples == 2 * n * 256  # every step counted
    assert [e.kind for e in events] == ["starting", "started", "changed", "stopped"]
    p50s = sorted(s.step_ms_p50 for s in samples if s.step_ms_p50 is not None)
    assert len(p50s) >= 3
    median = p50s[len(p50s) // 2]
    assert 0.5 * synced_ms <= median <= 2.0 * synced_ms, (median, synced_ms)
    assert all(s.cuda_allocated_mib and s.cuda_allocated_mib > 0 for s in samples)


def test_count_syncs_counts_an_item_per_step(tmp_path):
    import torch

    step = model_and_step(torch, size=512)
    path = tmp_path / "run.csv"
    with gpudash.track(path, interval_s=0.1) as tracker:
        with tracker.count_syncs() as clean:
            for _ in range(200):
                step()
                tracker.step(samples=256)
        with tracker.count_syncs() as syncing:
            deadline = time.monotonic() + 1.0
            while time.monotonic() < deadline:
                step().item()  # a sync each step
                tracker.step(samples=256)
    assert clean.syncs == 0 and clean.per_step == 0.0
    assert syncing.per_step is not None and syncing.per_step >= 1.0
    samples, events, _ = read(path)
    measured = [e for e in events if e.kind == EventKind.MEASURED and e.what == "syncs"]
    assert len(measured) == 2 and "syncs per step" in measured[1].message
    assert any(s.syncs_per_step is not None and s.syncs_per_step >= 1.0 for s in samples)


def test_nvml_columns_are_the_tracked_gpus(tmp_path):
    import torch

    step = model_and_step(torch, size=1024)
    path = tmp_path / "run.csv"
    with gpudash.track(path, interval_s=0.1) as tracker:
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            step()
            tracker.step(samples=256)
    _, _, msgs = read(path)
    gpu = [m for m in msgs if isinstance(m, GpuSample)]
    if not gpu:
        pytest.skip("NVML is not available on this machine")
    assert any(g.gpu_util_pct is not None and g.gpu_util_pct > 0 for g in gpu)
    assert all(g.mem_used_mib is not None for g in gpu)
