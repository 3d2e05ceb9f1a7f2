"""``gpudash tune`` on a GPU: a race over knobs that need CUDA, the diagnosis that starts it, and
the loss check of a winner that changes the number format."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.test_record import gpudash

pytestmark = pytest.mark.gpu


def test_tune_on_the_gpu_races_cuda_knobs_and_checks_a_bf16_winners_loss(tmp_path: Path) -> None:
    out = tmp_path / "t"
    r = gpudash(
        *"tune -w sync_loss -b 8 --knobs amp=bf16,channels_last,cuda_graph --device cuda -q --out".split(),
        str(out),
        cwd=tmp_path,
        timeout=400,
    )
    assert r.returncode == 0, r.stderr
    meta = json.loads((out / "tune.json").read_text())
    answer = meta["answer"]
    # the sync-free variant with graphs beats the one that waits six times a step
    assert answer["winner"].startswith("fixed+") and "cuda_graph" in answer["winner"], answer
    assert answer["vs_plain"]["base"] == "sync-heavy" and answer["vs_plain"]["verdict"] == "faster"
    assert answer["diagnosis_before"]["bound"] == "sync-bound"
    md = (out / "tune.md").read_text()
    assert "| `sync-heavy` | 8 |" in md and "clearly slower than the leader" in md  # out after the first look
    if "amp=bf16" in answer["winner"]:  # the correctness guard: both losses, close
        assert abs(float(answer["loss"]["diff_pct"])) < 5
    else:
        assert "loss" not in answer
