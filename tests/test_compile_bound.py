"""The compile-bound rule (``gpudash.diagnosis.compile_bound``): a job whose recompiles go on through
its training and take a tenth of its time or more is compile-bound, with the cause that cost the
most and its fix; one whose recompiles stopped (every length seen, or the recompile limit) is not,
and a limit is said beside any verdict; NVML's re-judging of a window keeps the compile verdict."""

from __future__ import annotations

from typing import Any

import pytest

from gpudash.core.compile_intake import CompileIntake
from gpudash.core.compile_table import CompileTable
from gpudash.core.gpu_messages import GpuSample
from gpudash.core.running import Running
from gpudash.diagnosis.compile_bound import compile_bound, limit_note
from gpudash.diagnosis.evidence import Evidence
from gpudash.diagnosis.judge import judged
from gpudash.diagnosis.verdict import Bound
from gpudash.job.diagnosis_window import VerdictContext, verdict_event
from tests.helpers import verdict_of

TRAIN = "/home/me/train.py"


def _table(steps: list[int], seconds: float = 0.5, limit: bool = False) -> CompileTable:
    """A forward compiled at step 1 and again at each of ``steps``, a new batch length each time."""
    intake = CompileIntake()
    first = {"id": "0/0", "fn": "forward", "file": TRAIN, "line": 40, "s": 2.0, "why": ""}
    intake.events({"step": 1, "compiles": [first], "breaks": []}, 1.0)
    for i, step in enumerate(steps, start=1):
        why = f"0/{i - 1}: tensor 'x' size mismatch at index 0. expected {60 + i}, actual {61 + i}"
        again = {"id": f"0/{i}", "fn": "forward", "file": TRAIN, "line": 40, "s": seconds, "why": why}
        intake.events({"step": step, "compiles": [again], "breaks": []}, float(step))
    if limit:
        refused = {
            "id": f"0/{len(steps) + 1}",
            "fn": None,
            "s": 0.0,
            "why": "",
            "fail": "Unsupported",
            "fail_why": "Dynamo recompile limit exceeded",
        }
        intake.events({"step": 99, "compiles": [refused], "breaks": []}, 99.0)
    return intake.table


def test_recompiles_that_go_on_and_cost_a_tenth_are_compile_bound_with_the_fix_for_their_cause() -> None:
    verdict = compile_bound(_table([10, 20, 30, 40, 50, 60, 70, 80]), training_s=8.0, steps=80)
    assert verdict is not None and verdict.bound == Bound.COMPILE
    assert verdict.why.startswith("8 recompiles during training took 4 s, 33% of the time training and recompiling")
    assert "forward at train.py:40, dim 0 of x changes (8×, 4 s)" in verdict.why
    assert "the 80 steps would take 8 s instead of 12 s (1.50× faster)" in verdict.why
    assert "torch._dynamo.mark_dynamic(x, 0)" in verdict.advice


def test_recompiles_that_stopped_or_cost_little_are_not_compile_bound() -> None:
    assert compile_bound(_table([5, 10, 15]), training_s=8.0, steps=200) is None  # every length seen by step 15
    assert compile_bound(_table([50, 100, 150], seconds=0.05), training_s=8.0, steps=200) is None  # 2% of the time
    assert compile_bound(_table([150]), training_s=1.0, steps=200) is None  # one recompile is not a habit
    assert compile_bound(None, training_s=8.0, steps=200) is None


def test_the_recompile_limit_is_said_beside_the_verdict() -> None:
    assert limit_note(_table([10, 20], limit=True)) == (
        "hit the recompile limit, running uncompiled (eager) since: forward at train.py:40"
    )
    assert limit_note(_table([10, 20], limit=True), now_s=194.0, step=860) == (  # hit at step 99, 99 s in
        "hit the recompile limit, running uncompiled (eager) since: forward at train.py:40 (step 99: 95 s and 761 "
        "steps ago)"
    )
    assert limit_note(_table([10, 20])) == ""


def test_the_judge_with_nvml_keeps_the_compile_verdict_and_json_says_both() -> None:
    evidence = Evidence(steps=20, step_ms=30.0, input_ms=0.0, gpu_busy_pct=40.0)
    known = VerdictContext(compiles=_table([10, 20, 30, 40, 50, 60, 70, 80]), training_s=8.0, steps=80)
    event = verdict_event(12.0, evidence, None, known, Running("job:train.py", "", 64))
    bare = judged(event, None)
    assert bare.message.startswith("compile-bound: 8 recompiles during training")
    with_gpu = judged(event, GpuSample(time_s=1.0, mem_bw_util_pct=20.0, sm_active_pct=30.0))
    assert with_gpu.message == bare.message and verdict_of(with_gpu).verdict.bound != Bound.COMPILE
    said, _ = verdict_of(with_gpu).answer()
    assert said["bound"] == "compile-bound" and str(said["why"]).startswith("8 recompiles")
    assert said["steady"] == verdict_of(with_gpu).verdict.line()
    assert said["compile"] == {
        "compile_recompiles": "8",
        "compile_lost_s": "4.000",
        "compile_training_s": "8.000",
        "compile_steps": "80",
        "compile_last_step": "80",
    }


def test_the_first_compile_is_the_compile_phase_not_start_up() -> None:
    """dynamo's seconds for the compiles before the first step's end leave start-up for the compile
    phase; the wall time still adds up."""
    from gpudash.core.protocol import COMPILE, STARTUP
    from gpudash.job.phase_watch import PhaseWatch
    from gpudash.job.step_record import StepRecord
    from gpudash.job.steps import JobSamples

    emitted: list[dict[str, Any]] = []
    watch = PhaseWatch(0.0, JobSamples("job:x.py", "", 0.25, 0.0), None, lambda *_, **kw: emitted.append(kw))  # type: ignore[arg-type]
    watch.step(StepRecord(1, 30.0, None, 0, 0, 0.0, None, False, None))
    watch.started(compiled_s=25.0)
    watch.step(StepRecord(2, 31.0, None, 0, 0, 0.0, None, False, 1.0))
    totals = watch.phases.totals(31.0)
    assert totals[STARTUP] == pytest.approx(5.0) and totals[COMPILE] == pytest.approx(25.0)
    assert sum(totals.values()) == pytest.approx(31.0)
    assert emitted[-1]["message"] == "startup 5.00 s (launch to the first step, less 25.00 s compiling)"


def test_a_job_that_called_torch_compile_and_has_not_stepped_is_said_to_be_compiling() -> None:
    from gpudash.job.started import quiet_note

    said = quiet_note(61.0, hello=True, stepped=False, no_hello_s=30.0, no_step_s=60.0, compiling=True)
    assert said is not None and "the job called torch.compile, and a first compile can take minutes" in said[1]
    plain = quiet_note(61.0, hello=True, stepped=False, no_hello_s=30.0, no_step_s=60.0)
    assert plain is not None and "torch.compile" not in plain[1]
