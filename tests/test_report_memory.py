"""Issue 64 in ``report``: a job's memory by kind per run (run.json's ``memory``), what would fit,
why it ran out (``out_of_memory``), and two runs' memory side by side — in the markdown and in
``--json``."""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from pathlib import Path

import pytest

from gpudash.cli.main import main
from tests.tui.dashboard import FIXTURE

GIB = 1 << 30


def _run_with_memory(folder: Path, name: str, memory: Mapping[str, object], oom: str = "") -> Path:
    """The fixture recording, its run.json holding ``memory`` (and an out-of-memory message)."""
    path = folder / f"{name}.csv"
    shutil.copy(FIXTURE, path)
    meta = json.loads(FIXTURE.with_suffix(".json").read_text()) if FIXTURE.with_suffix(".json").exists() else {}
    meta["memory"] = memory
    if oom:
        meta["out_of_memory"] = {"message": oom, "step": 12}
    path.with_suffix(".json").write_text(json.dumps(meta))
    return path


def test_a_runs_memory_its_fit_and_why_it_ran_out_are_in_the_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    small = {
        "params_bytes": 2 * GIB,
        "grads_bytes": 2 * GIB,
        "optimizer_bytes": 4 * GIB,
        "activations_bytes": 8 * GIB,
        "peak_allocated_bytes": 17 * GIB,
        "total_bytes": 80 * GIB,
        "batch": 16,
        "fits_batch": 120,
    }
    large = {**small, "activations_bytes": 64 * GIB, "peak_allocated_bytes": 79 * GIB, "batch": 128}
    del large["fits_batch"]
    a = _run_with_memory(tmp_path, "a", small)
    b = _run_with_memory(tmp_path, "b", large, oom="out of memory at train.py:88 (step 12, training)\x1b[2J")
    assert main(["report", str(a), str(b), "--out", str(tmp_path / "r")]) == 0
    md = (tmp_path / "r" / "report.md").read_text()
    assert "| activations | 8,589,934,592 | 8 GiB |" in md
    assert "At batch 16 a rank, a batch up to about 120 would fit." in md
    assert "**It ran out of memory:** out of memory at train.py:88 (step 12, training)" in md and "\x1b" not in md
    assert "| 1 | 2 GiB | 2 GiB | 4 GiB | 8 GiB | 17 GiB | 80 GiB |" in md  # side by side
    assert "| 2 | 2 GiB | 2 GiB | 4 GiB | 64 GiB | 79 GiB | 80 GiB |" in md
    capsys.readouterr()
    assert main(["report", str(a), str(b), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["runs"][0]["memory"]["fits_batch"] == 120
    assert doc["runs"][1]["memory"]["out_of_memory"].startswith("out of memory at train.py:88")


def test_a_run_without_memory_figures_has_no_memory_section(tmp_path: Path) -> None:
    path = _run_with_memory(tmp_path, "a", {"params_bytes": "many"})  # a hostile value: not a figure
    assert main(["report", str(path), "--out", str(tmp_path / "r")]) == 0
    assert "### Memory" not in (tmp_path / "r" / "report.md").read_text()
