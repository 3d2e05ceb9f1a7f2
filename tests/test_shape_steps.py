"""A compiled job's steps at a new shape are kept out of its steady rate and said apart (issue 90):
their count, seconds, share of the training and cost over the steady pace (``gpudash.job.shape_steps``)."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from gpudash.boot.gpudash_boot.compiled_flops import CompiledForwards, uses_cuda_graphs
from gpudash.job.shape_steps import GENERAL_FIX, ShapeSteps
from gpudash.job.step_record import StepRecord
from gpudash.job.steps import window_figures
from gpudash.recording.record import facts_of

STEADY_S, NEW_S = 0.0064, 0.160


def _steps() -> list[StepRecord]:
    """40 steps of 6.4 ms, every tenth at a new length: 160 ms (new kernels, a CUDA graph recorded)."""
    out, t = [], 0.0
    for i in range(40):
        new = i % 10 == 5
        t += NEW_S if new else STEADY_S
        out.append(StepRecord(i, t, None, 8, 0, 0.0, None, False, train_s=NEW_S if new else STEADY_S, new_shape=new))
    return out


def test_a_windows_rate_is_its_steps_at_shapes_already_compiled() -> None:
    figures = window_figures(_steps())
    assert figures.steps == 40 and figures.timed_steps == 36
    assert figures.steps_per_s == pytest.approx(1 / STEADY_S)  # with them: 40 / 0.87 s, 46 steps/s


def test_a_window_of_new_shapes_alone_has_no_rate_unless_no_shape_ever_repeated() -> None:
    """A window of a new shape's steps alone (a 172 ms step recording CUDA graphs again, on an H200)
    gives no rate of its own; in a job whose shapes never repeat, its rate is all its steps'."""
    records = [StepRecord(i, 0.01 * i, None, 8, 0, 0.0, None, False, train_s=0.01, new_shape=True) for i in range(10)]
    assert window_figures(records).steps_per_s is None
    assert window_figures(records, steady_known=False).steps_per_s == pytest.approx(100.0)


def test_the_steps_at_a_new_shape_are_tallied_with_their_cost_and_the_fix() -> None:
    shapes = ShapeSteps()
    for record in _steps():
        shapes.add(record)
    assert (shapes.steps, shapes.steady_steps) == (4, 36)
    assert shapes.line() == (
        "4 steps ran at a new shape: 0.64 s, 74% of the training (160 ms a step against 6.4 ms at shapes already "
        f"compiled: 0.61 s more) — {GENERAL_FIX}"
    )
    event = shapes.event(12.0, fix="pad idx")
    assert event is not None and event.message.endswith(" — pad idx") and facts_of(event)["new_shape_steps"] == 4
    assert ShapeSteps().event(1.0) is None and ShapeSteps().line() == ""


@pytest.mark.slow  # dynamo's import and two compiles: about 6 s
@pytest.mark.usefixtures("compiles_forgotten")
def test_a_compiled_modules_training_forward_at_a_new_shape_marks_its_step() -> None:
    """The hooks' watch of a compiled module (``compiled_flops``): the first two training forwards at
    a shape mark their steps (2 where the module runs as CUDA graphs: recorded again); a later
    forward at that shape, an evaluation's or one without grad marks nothing."""
    forwards = CompiledForwards(torch)
    plain: Any = torch.compile(torch.nn.Linear(4, 2), backend="eager")
    graphed: Any = torch.compile(torch.nn.Linear(4, 2), backend="eager")
    forwards.watch(plain, None, {})
    forwards.watch(graphed, None, {"mode": "reduce-overhead"})
    marks = []
    for batch in (8, 8, 8, 16):  # its first two calls at a shape pay for it: compiled, then its graphs recorded
        plain(torch.randn(batch, 4))
        marks.append(forwards.stepped())
    graphed(torch.randn(8, 4))
    marks.append(forwards.stepped())
    graphed.eval()
    graphed(torch.randn(32, 4))  # an evaluation's forward: not a training step's shape
    with torch.no_grad():
        plain(torch.randn(64, 4))
    marks.append(forwards.stepped())
    assert marks == [1, 1, 0, 1, 2, 0]
    assert uses_cuda_graphs({"mode": "max-autotune"}) and uses_cuda_graphs({"options": {"triton.cudagraphs": True}})
    assert not uses_cuda_graphs({"mode": "default"}) and not uses_cuda_graphs({})


def test_a_step_at_a_new_shape_that_ran_at_the_steady_pace_paid_nothing_and_is_tallied_steady() -> None:
    """Automatic dynamic shapes: after the graph went dynamic, a new length builds no kernel; its
    step (6.5 ms beside 6.4) is no step that paid for a shape."""
    shapes = ShapeSteps()
    for record in _steps():
        shapes.add(record)
    for i in range(3):
        shapes.add(StepRecord(40 + i, 1.0 + i, None, 8, 0, 0.0, None, False, train_s=0.0065, new_shape=True))
    assert (shapes.steps, shapes.steady_steps) == (4, 39)
    assert shapes.seconds == pytest.approx(4 * NEW_S) and shapes.steady_s == pytest.approx(36 * STEADY_S + 3 * 0.0065)
    assert shapes.line().startswith("4 steps ran at a new shape: 0.64 s")


def test_a_step_at_a_new_shape_after_its_compile_paid_for_it_and_the_line_says_both_costs() -> None:
    """A recompile's time is a phase apart; the step after it ran near the steady pace (the CPU's eager
    backend) yet paid: the line gives its training seconds and, with the compile, the whole cost."""
    shapes = ShapeSteps()
    for record in _steps():
        shapes.add(record)
    shapes.add(StepRecord(40, 2.0, None, 8, 0, 0.0, None, False, train_s=0.007, phase_s=0.7, new_shape=True))
    assert (shapes.steps, shapes.steady_steps) == (5, 36) and shapes.phase_s == pytest.approx(0.7)
    line = shapes.line()
    assert "; with the phases before them (their compiles), timed apart, 1.3 s in all — " in line, line
    event = shapes.event(3.0)
    assert event is not None and facts_of(event)["new_shape_phase_s"] == 0.7
