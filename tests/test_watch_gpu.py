"""``gpudash watch --once`` on a real GPU: NVML lists this test's own process once it holds a CUDA
tensor, with its user, command and GPU memory (``pytest -m gpu tests/test_watch_gpu.py``)."""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import sys

import pytest

from tests.helpers import ROOT

pytestmark = pytest.mark.gpu


def watch_once(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpudash", "watch", "--once", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )


def test_watch_once_lists_this_process_holding_a_cuda_tensor() -> None:
    import torch

    held = torch.ones(64 << 20, device="cuda")  # 256 MiB on cuda:0
    torch.cuda.synchronize()
    proc = watch_once("--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["schema"] == "gpudash-watch/1" and doc["driver"]
    assert doc["gpus"], "NVML lists no GPU"
    for g in doc["gpus"]:
        assert g["name"] and g["uuid"].startswith("GPU-") and g["memory_total_mib"] > 0
        assert g["utilization_pct"] is not None and g["temperature_c"] is not None
        assert g["processes"] is not None, g["errors"]
    mine = [(g["index"], p) for g in doc["gpus"] for p in g["processes"] if p["pid"] == os.getpid()]
    assert len(mine) == 1, f"pid {os.getpid()} not listed: {[g['processes'] for g in doc['gpus']]}"
    _, p = mine[0]
    assert p["user"] == pwd.getpwuid(os.getuid()).pw_name
    assert "python" in p["command"] or "pytest" in p["command"]
    assert p["used_memory_mib"] is None or p["used_memory_mib"] >= 256
    table = watch_once()
    assert table.returncode == 0 and any(line.split()[:1] == [str(os.getpid())] for line in table.stdout.splitlines())
    del held
