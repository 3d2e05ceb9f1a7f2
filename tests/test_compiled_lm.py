"""A compiled decoder LM whose sequence length changes every few steps (issue 90), on the CPU with
inductor where a C++ compiler is present, else dynamo's ``eager`` backend (two lengths: inductor's
C++ compile takes tens of seconds a length on the 2-core machine; the GPU runs of
``docs/bench/h200-issue90/`` are inductor's): compiled in place with ``model.compile()``, its step's
FLOPs are counted on the uncompiled model, as its eager run counts them, and the change of length it
paid for is tallied, its compile with it."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from tests.helpers import cpu_backend
from tests.test_job import JOBS, events, gpudash

JOB = str(JOBS / "compiled_lm.py")
ARGS = ("--lengths", "16,24", "--every", "6", "--steps", "36", "--width", "32", "--backend", cpu_backend())

pytestmark = pytest.mark.slow


def _flops(path: Path) -> dict[str, str]:
    (event,) = [e for e in events(path) if e["event_kind"] == "measured" and e["event_what"] == "flops"]
    return event


def test_a_model_compiled_in_place_is_counted_as_its_eager_run_and_each_new_length_it_paid_for_said_once(
    tmp_path: Path,
) -> None:
    compiled, eager = tmp_path / "compiled.csv", tmp_path / "eager.csv"
    done = gpudash("record", str(compiled), "-q", "--", sys.executable, JOB, *ARGS, "--in-place", timeout=240)
    assert done.returncode == 0, done.stderr
    plain = gpudash("record", str(eager), "-q", "--", sys.executable, JOB, *ARGS, "--no-compile", timeout=240)
    assert plain.returncode == 0, plain.stderr
    counted, reference = _flops(compiled), _flops(eager)
    assert "counted as the uncompiled model's forward and backward on fake tensors" in counted["event_message"]
    counted_flops = json.loads(counted["event_data"])["data"]["flops_per_step"]
    assert counted_flops == json.loads(reference["event_data"])["data"]["flops_per_step"] > 0
    meta = json.loads((tmp_path / "compiled.json").read_text())
    line = meta["new_shapes"]["line"]
    # length 24 recompiled (a compile phase before its first step); its second step pays only where it
    # ran over twice the steady step; the first length's steps are its warm-up, and 16 again is compiled
    m = re.match(r"(\d) steps? ran at a new shape: .*; with the phases before them \(their compiles\)", line)
    assert m is not None and 1 <= int(m[1]) <= 2, line
    assert "mark dim 1 of idx dynamic (torch._dynamo.mark_dynamic(idx, 1)" in line, line
