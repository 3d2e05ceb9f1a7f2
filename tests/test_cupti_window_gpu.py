"""The kernels-only window's own CUPTI recorder on a real GPU (``pytest -m gpu
tests/test_cupti_window_gpu.py``): the same steps of a small convolutional net, recorded by it and
by ``torch.profiler`` (CUDA), hold the same kernels by name and count and the same copies; the
busy time it reads is Kineto's within 10%; and a second window in the same process records as
the first did (CUPTI left attached, its kinds re-enabled)."""

from __future__ import annotations

import collections
import time
from pathlib import Path
from typing import Any

import pytest

from gpudash.engine.trace_figures import figures
from gpudash.engine.trace_read import read_bounded
from tests.helpers import boot_module

pytestmark = pytest.mark.gpu
STEPS = 4


def net_step(torch: Any) -> Any:
    """One training step of a small conv net on a batch copied from pinned memory each step."""
    torch.backends.cudnn.benchmark = False
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(32 * 32 * 32, 10)
    ).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    images = torch.randn(64, 3, 32, 32).pin_memory()
    labels = torch.randint(0, 10, (64,))

    def step() -> None:
        x, y = images.cuda(non_blocking=True), labels.cuda(non_blocking=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    return step


def by_cupti(torch: Any, step: Any, path: Path) -> list[dict[str, Any]]:
    tracer = boot_module("gpudash_job_cupti").new_tracer(torch)
    tracer.start()
    marks = [time.monotonic()]
    for _ in range(STEPS):
        step()
        marks.append(time.monotonic())
    torch.cuda.synchronize()
    tracer.write(str(path), tracer.stop(), marks)
    return read_bounded(path).events


def by_kineto(torch: Any, step: Any, path: Path) -> list[dict[str, Any]]:
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(STEPS):
            step()
        torch.cuda.synchronize()
    prof.export_chrome_trace(str(path))
    return read_bounded(path).events


def device_names(events: list[dict[str, Any]], cat: str) -> collections.Counter[str]:
    return collections.Counter(str(e["name"]) for e in events if e.get("cat") == cat)


def test_the_recorder_holds_the_kernels_kineto_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    monkeypatch.setenv("TEARDOWN_CUPTI", "1")  # as gpudash's own Kineto windows (T, a diagnosis) set it
    step = net_step(torch)
    first = by_cupti(torch, step, tmp_path / "cupti-1.json")
    kineto = by_kineto(torch, step, tmp_path / "kineto.json")
    for _ in range(10):  # steps between two windows, as gpudash spaces them: Kineto's teardown of CUPTI is done
        step()
    torch.cuda.synchronize()
    time.sleep(0.5)
    second = by_cupti(torch, step, tmp_path / "cupti-2.json")
    assert device_names(first, "kernel") == device_names(kineto, "kernel")
    assert device_names(second, "kernel") == device_names(kineto, "kernel")
    assert sum(device_names(first, "gpu_memcpy").values()) == sum(device_names(kineto, "gpu_memcpy").values())
    ours, theirs = figures(first, STEPS, 1.0), figures(kineto, STEPS, 1.0)
    assert ours.gpu_ms_per_step and theirs.gpu_ms_per_step
    assert abs(ours.gpu_ms_per_step / theirs.gpu_ms_per_step - 1) < 0.10, (ours, theirs)
    assert ours.kernels_per_step == theirs.kernels_per_step
