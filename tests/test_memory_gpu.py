"""Memory on a GPU, for real (issue 64's done-conditions the suite can hold): a GPT-style job's peak
as gpudash records it against the job's own ``torch.cuda.max_memory_allocated()``, the line that
holds the most at the peak (the attention's softmax) from the allocator's history, and a family's
steps recorded the same way."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

GPT = Path(__file__).parent / "data" / "jobs" / "gpt_memory.py"


def _gpudash(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpudash", *args], capture_output=True, text=True, timeout=400)


def test_a_gpt_jobs_peak_is_its_own_max_memory_allocated(tmp_path: Path) -> None:
    out = tmp_path / "r.csv"
    done = _gpudash("record", str(out), "-q", "--", sys.executable, str(GPT), "--steps", "40")
    assert done.returncode == 0, done.stderr
    (own,) = re.findall(r"JOB memory peak_allocated=(\d+)", done.stdout + done.stderr)
    memory = json.loads(out.with_suffix(".json").read_text())["memory"]
    assert int(memory["peak_allocated_bytes"]) == pytest.approx(int(own), rel=0.02)
    assert int(memory["activations_bytes"]) > 0 and int(memory["fits_batch"]) > 8


def test_a_frozen_teacher_on_the_gpu_is_counted_to_the_byte(tmp_path: Path) -> None:
    """Its teacher's parameters that the step uses, each storage once (its tied layers), apart from
    the student's trained ones. (Its batches come from no DataLoader: its batch, and so what fits,
    are not known.)"""
    job = Path(__file__).parent / "data" / "jobs" / "distill_frozen.py"
    out = tmp_path / "d.csv"
    done = _gpudash("record", str(out), "-q", "--", sys.executable, str(job), "--steps", "30", "--device", "cuda")
    assert done.returncode == 0, done.stderr
    own = dict(re.findall(r"(\w+)=(\d+)", re.search(r"JOB memory (.*)", done.stdout)[1]))  # type: ignore[index]
    memory = json.loads(out.with_suffix(".json").read_text())["memory"]
    assert (memory["frozen_bytes"], memory["params_bytes"]) == (int(own["frozen"]), int(own["params"]))


def test_the_softmax_line_holds_the_most_at_a_gpt_jobs_peak() -> None:
    done = _gpudash("diagnose", "--memory", "--json", "-q", "--", sys.executable, str(GPT), "--steps", "200")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    named = [h for h in answer["peak"]["holders"] if "site" in h]
    top = named[0]
    assert (Path(top["site"]["file"]).name, top["site"]["line"], top["kind"]) == ("gpt_memory.py", 33, "forward")
    assert answer["peak"]["peak_bytes"] > 0 and "parameters" in answer["memory"]
    engine = [h for h in answer["peak"]["holders"] if "site" not in h and h["kind"] == "backward"]
    assert engine and all(h.get("node") for h in engine), engine  # each put to its autograd node
    assert any(re.fullmatch(r"\w+Backward\d+", h["node"]) for h in engine), engine


def test_a_familys_steps_are_recorded_with_the_allocators_history() -> None:
    done = _gpudash("diagnose", "--memory", "--json", "-q", "-w", "resnet50", "--device", "cuda", "--warmup", "2")
    assert done.returncode == 0, done.stderr
    peak = json.loads(done.stdout)
    assert peak["peak_bytes"] > peak["start_bytes"] > 0
    assert any(h["kind"] == "forward" for h in peak["holders"])


def test_a_familys_rows_carry_the_allocators_peak_and_its_activations(tmp_path: Path) -> None:
    import csv

    out = tmp_path / "r.csv"
    done = _gpudash("record", str(out), "-q", "-w", "resnet50", "--device", "cuda", "--duration", "6")
    assert done.returncode == 0, done.stderr
    with open(out, newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["row_kind"] == "sample" and r["mem_peak_mib"]]
    assert rows and all(float(r["mem_peak_mib"]) >= float(r["cuda_allocated_mib"]) > 0 for r in rows)
    assert all(float(r["mem_params_mib"]) > 90 for r in rows)  # ResNet-50: 25.6 M parameters, fp32
    assert any(float(r["mem_activations_mib"] or 0) > 100 for r in rows)  # its saved activations, counted apart


def test_what_fits_leaves_out_what_another_process_holds_of_the_gpu(tmp_path: Path) -> None:
    """The same GPT-style job twice, the second time beside a process holding 20 GiB of the GPU:
    what fits shrinks by about 20 GiB's worth of samples, and the line says why."""

    def fits(name: str) -> tuple[int, str]:
        out = tmp_path / f"{name}.csv"
        done = _gpudash("record", str(out), "--", sys.executable, str(GPT), "--steps", "40")
        assert done.returncode == 0, done.stderr
        return int(json.loads(out.with_suffix(".json").read_text())["memory"]["fits_batch"]), done.stderr

    alone, _ = fits("alone")
    hold = (
        "import torch, sys; x = torch.empty(20 << 30, dtype=torch.uint8, device='cuda'); "
        "print('held', flush=True); sys.stdin.read()"
    )
    holder = subprocess.Popen([sys.executable, "-c", hold], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        beside, stderr = fits("beside")
    finally:
        holder.kill()
        holder.wait()
    assert beside < alone, (beside, alone)
    assert re.search(r"with 2\d(\.\d+)? GiB of the GPU held outside its allocator", stderr), stderr
