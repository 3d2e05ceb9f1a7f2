"""``gpudash watch --once`` with GPM's figures (SM, tensor and DRAM activity): where they are read,
where they are not and why (once), and MIG's GPU instances; GPM faked at the ``pynvml`` boundary."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from tests.fake_gpm import add_gpm
from tests.fake_gpus import WatchBox, installer, watch_box
from tests.test_watch import once


@pytest.fixture
def box(monkeypatch: pytest.MonkeyPatch) -> Callable[[int], WatchBox]:
    """``box(n)``: a box of n fake GPUs behind ``pynvml`` (as the watch tests' own)."""
    return installer(monkeypatch, watch_box)


@pytest.mark.parametrize("gpm", ["pre-Hopper", "no GPM in pynvml"])
def test_without_gpm_once_leaves_its_figures_out_and_says_why_once(box, capsys, gpm: str) -> None:
    nv = box(2)
    if gpm == "pre-Hopper":
        add_gpm(nv).unsupported |= {0, 1}
    code, out, err = once(capsys)
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[1].startswith("  kernel-active 10% · mem-bw 5% ·") and "SM " not in out and "tensor" not in lines[1]
    why = [line for line in lines if line.startswith("GPM (SM, tensor and DRAM activity)")]
    assert len(why) == 1 and lines[-2] == why[0]  # once, after the GPUs, before the driver
    assert ("needs a Hopper or newer GPU" if gpm == "pre-Hopper" else "needs a newer nvidia-ml-py") in why[0]
    code, out, _ = once(capsys, "--json")
    doc = json.loads(out)
    assert doc["gpm_unavailable"] == why[0]
    assert all(g["sm_active_pct"] is g["tensor_active_pct"] is g["dram_active_pct"] is None for g in doc["gpus"])
    assert doc["gpus"][1]["utilization_pct"] == 11.0  # the rest as ever


def test_once_names_the_gpu_without_gpm_on_a_mixed_box(box, capsys) -> None:
    add_gpm(box(2)).unsupported.add(1)
    code, out, _ = once(capsys)
    gpu0, gpu1 = out.split("\nGPU ")
    assert code == 0 and "· SM 60% · tensor 40% · DRAM 20% ·" in gpu0 and "SM " not in gpu1.split("\n")[1]
    assert "GPM (SM, tensor and DRAM activity): GPU 1 needs a Hopper or newer GPU: Fake GPU 1 has none" in out


def test_once_shows_each_mig_instance_under_its_gpu_in_the_table_and_the_json(box, capsys) -> None:
    g = add_gpm(box(2))
    g.mig[0] = {1: "MIG-aaaa", 2: "MIG-bbbb"}  # GPU 0 in MIG mode, two GPU instances
    code, out, _ = once(capsys)
    lines = out.splitlines()
    first = lines.index(next(line for line in lines if line.startswith("GPU 0 ·")))
    assert code == 0 and lines[first + 2 : first + 4] == [
        "  └ GPU 0 · GI 1: SM 70% · tensor 50% · DRAM 30%",
        "  └ GPU 0 · GI 2: SM 80% · tensor 60% · DRAM 40%",
    ]
    code, out, _ = once(capsys, "--json")
    mig = json.loads(out)["mig"]
    assert code == 0 and [m["label"] for m in mig] == ["GPU 0 · GI 1", "GPU 0 · GI 2"]
    assert (mig[1]["sm_active_pct"], mig[1]["tensor_active_pct"], mig[1]["dram_active_pct"]) == (80.0, 60.0, 40.0)
