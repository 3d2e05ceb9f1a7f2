"""A user's compiled job under ``gpudash record`` and ``diagnose`` (issue 75), on the CPU with
``backend="eager"`` (dynamo recompiles and breaks graphs as it does for inductor):
``tests/data/jobs/compiled_recompiles.py`` changes its batch length every few steps under
``dynamic=False`` and reads a float off a tensor in its forward. Each recompile is said with its
function's line and its sizes, the graph break at its line with its reason, the compile phase and
table in run.json, a function past the recompile limit is told, the job's own output is as bare, and a
job that keeps recompiling is compile-bound with the fix for its cause."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests import printed
from tests.helpers import once_per_session
from tests.test_job import JOBS, gpudash

JOB = str(JOBS / "compiled_recompiles.py")
ARGS = ("--lengths", "64,96", "--every", "5", "--steps", "40")
SOURCE = Path(JOB).read_text().splitlines()
FORWARD_LINE = 1 + next(i for i, line in enumerate(SOURCE) if "def forward" in line)
BREAK_LINE = 1 + next(i for i, line in enumerate(SOURCE) if ".item()" in line)  # ``spread = out.std().item()``
TORCH_LOG = re.compile(r"^[WIEC]\d{4} [\d:.]+ +\d+ \S+\] ")  # torch's log prefix: its time and pid

pytestmark = pytest.mark.slow


Recorded = tuple[str, str, dict[str, object]]  # the job's stdout, record's stderr, run.json
Reported = tuple[str, str, dict[str, object], str]  # ... and report.md


def _recorded(tmp: Path) -> Reported:
    done = gpudash("record", str(tmp / "run.csv"), "--", sys.executable, JOB, *ARGS, timeout=240)
    assert done.returncode == 0, done.stderr
    report = gpudash("report", str(tmp / "run.csv"), "--out", str(tmp / "report"), "-q")
    assert report.returncode == 0, report.stderr
    meta = json.loads((tmp / "run.json").read_text())
    return done.stdout, done.stderr, meta, (tmp / "report" / "report.md").read_text()


@pytest.fixture(scope="module")
def reported(tmp_path_factory: pytest.TempPathFactory) -> Reported:
    return once_per_session(tmp_path_factory, "compiled-job", lambda: _recorded(tmp_path_factory.mktemp("compiled")))


@pytest.fixture(scope="module")
def recorded(reported: Reported) -> Recorded:
    return reported[:3]


def test_each_recompile_is_said_with_its_functions_line_and_its_sizes(recorded: Recorded) -> None:
    _, stderr, _ = recorded
    said = [e.text for e in printed.event_lines(stderr, "measured") if e.text.startswith("recompile ")]
    assert any(
        t.startswith(f"recompile 1 of forward (compiled_recompiles.py:{FORWARD_LINE}): dim 0 of x: 64 → 96, ")
        for t in said
    ), said
    assert all(re.search(r", \d+\.\d\d s — ", t) for t in said)  # each with its seconds and its fix


def test_the_graph_break_is_said_at_its_line_with_its_reason_once(recorded: Recorded) -> None:
    _, stderr, meta = recorded
    breaks = [e.text for e in printed.event_lines(stderr, "measured") if e.text.startswith("graph break")]
    assert breaks == [
        f"graph break at compiled_recompiles.py:{BREAK_LINE}: Tensor.item() (a number read off a tensor) — keep the "
        "value a tensor (no .item()/float() inside the compiled code), or set "
        "torch._dynamo.config.capture_scalar_outputs = True"
    ]
    table = meta["compile"]
    assert isinstance(table, dict)
    (row,) = table["graph_breaks"]
    assert row["where"].endswith(f"compiled_recompiles.py:{BREAK_LINE}") and row["count"] >= 1


def test_run_json_holds_the_compile_table_and_the_compile_phase(recorded: Recorded) -> None:
    _, stderr, meta = recorded
    table = meta["compile"]
    assert isinstance(table, dict)
    forward = next(f for f in table["functions"] if f["function"] == "forward")
    assert forward["where"].endswith(f"compiled_recompiles.py:{FORWARD_LINE}")
    assert forward["compiles"] == 1 + forward["recompiles"] >= 2
    assert {r["cause"] for r in forward["reasons"]} == {"dim 0 of x changes"}
    assert table["seconds"] > 0 and all(r["seconds"] > 0 for r in table["recompiles"])
    phases = meta["phases"]
    assert isinstance(phases, dict) and phases["compile"] > 0
    assert "compiles: 2 functions compiled" in stderr  # the end's one line
    assert f"forward (compiled_recompiles.py:{FORWARD_LINE}) runs as 2 graphs" in stderr
    assert table["graphs"] == {f"forward (compiled_recompiles.py:{FORWARD_LINE})": 2}


def test_the_jobs_own_output_is_as_it_is_bare(recorded: Recorded) -> None:
    stdout, stderr, _ = recorded
    bare = subprocess.run([sys.executable, JOB, *ARGS], capture_output=True, text=True, timeout=240)
    assert stdout == bare.stdout

    def own(text: str) -> list[str]:
        return [TORCH_LOG.sub("", line) for line in text.splitlines() if not line.startswith("gpudash:")]

    assert own(stderr) == own(bare.stderr)


def test_report_holds_the_compile_table(reported: Reported) -> None:
    report = reported[3]
    assert "### Compiles" in report
    forward = rf"\| forward \| `\S+compiled_recompiles\.py:{FORWARD_LINE}` \| \d+ \| [\d.]+ \| dim 0 of x changes"
    assert re.search(forward, report), report
    assert re.search(rf"\| `\S+compiled_recompiles\.py:{BREAK_LINE}` \| Tensor\.item\(\)", report), report


def test_a_function_past_the_recompile_limit_is_told_loudly(recorded: Recorded) -> None:
    """The rest of ``forward`` after its graph break takes the float it read as a constant: a new one
    at every step recompiles it until dynamo's limit (8), then it runs uncompiled: an error line."""
    _, stderr, meta = recorded
    # (a loaded machine may add "no word from the job after 15 s" while torch imports: another error)
    (error,) = [e.text for e in printed.event_lines(stderr, "error") if "recompile limit" in e.text]
    assert error.startswith(
        f"forward after line {BREAK_LINE} of compiled_recompiles.py hit the recompile limit: it runs uncompiled "
        "(eager) from here on — the last reason: a number read off a tensor changed (was "
    ), error
    table = meta["compile"]
    assert isinstance(table, dict)
    limited = [f["function"] for f in table["functions"] if f["recompile_limit_hit"]]
    assert limited == [f"forward after line {BREAK_LINE}"]


def test_diagnose_calls_a_job_that_keeps_recompiling_compile_bound_with_the_fix_for_its_cause() -> None:
    # a new length every 4 steps, none again for 1,600 steps: the recompiles go on through the diagnosis
    args = ("--lengths", "64:464", "--every", "4", "--steps", "1600", "--limit", "1000", "--no-break")
    done = gpudash("diagnose", "--no-check", "--warmup", "1", "--", sys.executable, JOB, *args, timeout=300)
    assert done.returncode == 0, done.stderr
    verdict = done.stdout.splitlines()[0]
    m = re.match(
        r"compile-bound: (\d+) recompiles during training took ([\d.]+) s, (\d+)% of the time training and "
        rf"recompiling; the most: forward at compiled_recompiles.py:{FORWARD_LINE}, dim 0 of x changes",
        verdict,
    )
    assert m is not None, verdict
    assert int(m[1]) >= 2 and int(m[3]) >= 10
    assert "Without them the " in verdict and "torch._dynamo.mark_dynamic(x, 0)" in verdict


def test_the_steps_at_a_new_shape_are_said_apart_with_their_cost_and_the_fix_for_their_cause(
    recorded: Recorded,
) -> None:
    _, stderr, _ = recorded
    said = [e.text for e in printed.event_lines(stderr, "measured") if "ran at a new shape" in e.text]
    # lengths 64, 96, 64, …: the steps at 64 before the first steady one are its warm-up, not a change of
    # shape; the first at 96 compiled (a phase before it), the second paid where it ran over two steady steps
    (line,) = said
    m = re.match(r"([12]) steps? ran at a new shape: .*% of the training \(.*; with the phases before them", line)
    assert m is not None, line
    assert line.endswith(
        "mark dim 0 of x dynamic (torch._dynamo.mark_dynamic(x, 0) before the call, or "
        "torch.compile(..., dynamic=True)), or pad x to a few bucket lengths"
    ), line


def test_run_json_and_report_hold_the_steps_at_a_new_shape(reported: Reported) -> None:
    _, _, meta, report = reported
    shapes = meta["new_shapes"]
    assert isinstance(shapes, dict) and shapes["new_shape_steps"] in (1, 2)
    assert shapes["line"].startswith(f"{shapes['new_shape_steps']} step")
    assert f"Steps at a new shape, left out of the steps/s above: {shapes['line']}." in report
