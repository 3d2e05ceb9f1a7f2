"""A periodic window on a real GPU (``pytest -m gpu tests/test_window_kinds_gpu.py``): the job's own
profiler window (``gpudash_boot.window.ProfilerWindow``), asked for the GPU's work alone, holds the
same kernels by name and count as a window of the host and the GPU over as many steps, and none of
the CUDA calls whose records slow its steps: on a torch that selects CUPTI's kinds (2.12 on) by
asking for them, on an older one by turning their records off in torch's own CUPTI."""

from __future__ import annotations

import collections
import contextlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gpudash.boot.gpudash_boot.window import ProfilerWindow

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parents[1]
STEPS = 4


def conv_step(torch: Any) -> Any:
    """One training step of a small conv net on a batch copied from pinned memory each step."""
    torch.backends.cudnn.benchmark = False
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(32 * 32 * 32, 10)
    ).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    images, labels = torch.randn(64, 3, 32, 32).pin_memory(), torch.randint(0, 10, (64,))

    def step() -> None:
        loss = torch.nn.functional.cross_entropy(model(images.cuda(non_blocking=True)), labels.cuda(non_blocking=True))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    return step


def window_of(torch: Any, step: Any, folder: Path, kernels_only: bool) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A window of ``STEPS`` steps as the job's hooks run one: its answer and its trace's events."""
    sent: list[dict[str, Any]] = []
    window = ProfilerWindow(torch, sent.append, contextlib.nullcontext)
    window.cuda = True
    window.ask({"steps": STEPS, "dir": str(folder), "name": "w", "kernels_only": kernels_only})
    for n in range(1, 2 * STEPS):
        window.at_step(n)
        step()
    (answer,) = sent
    assert not answer.get("error"), answer
    return answer, json.loads(Path(answer["path"]).read_text())["traceEvents"]


def kernels(events: list[dict[str, Any]]) -> collections.Counter[str]:
    return collections.Counter(str(e["name"]) for e in events if e.get("cat") == "kernel")


def windows_in_order(folder: Path | str, order: list[str]) -> list[dict[str, Any]]:
    """In this process, one window of each kind of ``order`` ("gpu": the GPU's work alone, "full"),
    in turn over the same step: what each held (its kernels, its CUDA calls, whether it held host
    operators, what its answer said of the calls)."""
    import torch

    step = conv_step(torch)
    out = []
    for n, kind in enumerate(order):
        answer, events = window_of(torch, step, Path(folder) / f"{n}-{kind}", kernels_only=kind == "gpu")
        out.append(
            {
                "kind": kind,
                "kernels": dict(kernels(events)),
                "calls": sum(1 for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")),
                "cpu_ops": any(e.get("cat") == "cpu_op" for e in events),
                "answer_calls": answer.get("calls"),
                "calls_why": answer.get("calls_why"),
                "torch": torch.__version__,
            }
        )
    return out


@pytest.mark.parametrize("order", [["gpu", "full"], ["full", "gpu", "full"]], ids=["gpu-first", "after-a-full-one"])
def test_a_gpu_only_window_holds_the_kernels_and_not_the_calls(tmp_path: Path, order: list[str]) -> None:
    """In a process of its own, as a job's: a GPU-only window first, and one after a full window
    (a diagnosis' window, then the periodic ones) hold the full windows' kernels and no CUDA call."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    code = (
        "import json; from tests.test_window_kinds_gpu import windows_in_order as w; "
        f"print(json.dumps(w({str(tmp_path)!r}, {order!r})))"
    )
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240, cwd=ROOT)
    assert ran.returncode == 0, ran.stderr[-2000:]
    windows = json.loads(ran.stdout.strip().splitlines()[-1])
    full = [w for w in windows if w["kind"] == "full"]
    (gpu_only,) = [w for w in windows if w["kind"] == "gpu"]
    assert full[0]["kernels"] and all(w["kernels"] == full[0]["kernels"] for w in windows), windows
    assert not gpu_only["calls"] and not gpu_only["answer_calls"], gpu_only
    assert not gpu_only["cpu_ops"], gpu_only
