"""The parts of issue 73's steps inside this process, on small models: which backward passes end a
hand-updated step (each way a script updates, gradient accumulation, no update at all); which doing
counts when a job changes its way (an optimizer's closure, ``gpudash.track()``); the one-off FLOP
count's bounds and what it cost; and the wrappers' frames kept out of a job's tracebacks."""

from __future__ import annotations

import contextlib
import sys
import threading
import traceback
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

from gpudash.boot.gpudash_boot import frames, step_flops, wraps
from gpudash.boot.gpudash_boot import hand as hand_module
from gpudash.boot.gpudash_boot.counting import StepCounting
from gpudash.job.mfu import job_count
from tests.helpers import BOOT


@pytest.fixture(scope="module")
def hand() -> Any:
    return hand_module


def _iterations(
    hand: Any, update: Callable[[torch.nn.Module], None], n: int = 6, accumulate: int = 1, zero_grad: bool = True
) -> Any:
    """``n`` iterations of a small model's training by hand, each pass told to a ``HandUpdates``:
    it, with the leaves of each step it took in ``taken``."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    taken: list[Any] = []
    watch = hand.HandUpdates(torch, taken.append)
    for _ in range(n):
        if zero_grad:
            model.zero_grad()
        for _ in range(accumulate):
            loss = model(torch.randn(16, 4)).pow(2).mean()
            watch.backward_starts(loss)
            loss.backward()
            watch.backward_ends()
        update(model)
    watch.taken = taken
    return watch


def _grad(p: torch.Tensor) -> torch.Tensor:
    assert p.grad is not None
    return p.grad


def _by_data(model: torch.nn.Module) -> None:
    for p in model.parameters():
        p.data.add_(_grad(p), alpha=-0.1)  # (.data: no version counted)


def _under_no_grad(model: torch.nn.Module) -> None:
    with torch.no_grad():
        for p in model.parameters():
            p.sub_(0.1 * _grad(p))


@pytest.mark.parametrize("update", [_by_data, _under_no_grad])
@pytest.mark.parametrize("accumulate", [1, 3])
def test_each_hand_update_ends_one_step_at_the_next_backward_pass(hand: Any, update: Any, accumulate: int) -> None:
    watch = _iterations(hand, update, n=6, accumulate=accumulate)
    assert len(watch.taken) == 5  # the last iteration has no pass after it; micro-batches are one step
    assert watch.confirmed and len(watch.taken[-1].param_groups[0]["params"]) == 4  # the leaves the passes fill


def test_an_update_only_its_values_show_is_seen_by_them_on_the_cpu(hand: Any) -> None:
    def old_style(model: torch.nn.Module) -> None:  # w.data -= lr * w.grad.data; w.grad.data.zero_()
        for p in model.parameters():
            p.data -= 0.1 * _grad(p).data
            _grad(p).data.zero_()

    watch = _iterations(hand, old_style, n=5, zero_grad=False)
    assert len(watch.taken) == 4 and watch.by_values


def test_backward_passes_that_update_nothing_are_no_steps_and_are_looked_at_no_more(hand: Any) -> None:
    watch = _iterations(hand, lambda model: None, n=hand.PROBATION_PASSES + 2)
    assert watch.taken == [] and not watch.on


def test_an_optimizers_closure_passes_are_its_steps_own_and_the_first_optimizer_step_takes_over() -> None:
    taken: list[Any] = []
    switches: list[tuple[str, str]] = []
    counting = StepCounting(torch, taken.append, lambda now, before: switches.append((now, before)))
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    x = torch.randn(8, 4)

    def iteration(update: Callable[[], None]) -> None:
        model.zero_grad()
        loss = model(x).pow(2).mean()
        counting.backward_starts(loss)
        loss.backward()
        counting.backward_ends()
        update()

    for _ in range(4):  # by hand: three steps (the fourth ends at the next pass)
        iteration(lambda: _by_data(model))
    optimizer = torch.optim.LBFGS(model.parameters(), max_iter=5)

    def closure() -> torch.Tensor:
        optimizer.zero_grad()
        loss = model(x).pow(2).mean()
        counting.backward_starts(loss)
        loss.backward()
        assert counting.backward_ends()  # inside the step: a closure's evaluation, not a step
        return loss

    counting.optimizer_starts((optimizer, closure), {})
    optimizer.step(closure)
    evaluations = counting.optimizer_ends()
    assert len(taken) == 3 and evaluations > 1  # the closure's passes: no step by hand
    assert counting.by == "optimizer" and switches == [("optimizer", "backward")]
    iteration(lambda: _by_data(model))
    assert len(taken) == 3 and not counting.tracked(8)  # nothing but the optimizer counts from now on


def test_a_track_step_takes_over_from_backward_passes_and_counts_its_samples() -> None:
    counting = StepCounting(torch, lambda leaves: None, lambda now, before: None)
    assert counting.tracked(32) and counting.tracked(32)
    assert counting.by == "track" and counting.track_samples == 64 and not counting.hand.on
    assert counting.leaves("cuda:1").device == "cuda:1" and counting.leaves("cpu").param_groups == [{"params": []}]


# -- the FLOP count: bounded, and its cost said ------------------------------------------------------
@pytest.fixture
def flops_part(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.delenv("GPUDASH_JOB_FAULT", raising=False)
    return step_flops


def _pass(model: torch.nn.Module, x: torch.Tensor) -> None:
    model(x).pow(2).mean().backward()


def test_a_count_whose_step_runs_past_its_time_gives_up_and_says_what_it_cost(
    flops_part: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(flops_part, "FLOOR_S", 0.0)
    sent: list[dict[str, Any]] = []
    part = flops_part.StepFlopsCount(torch, sent.append)
    model, x = torch.nn.Linear(16, 16), torch.randn(8, 16)
    part.at_step("cpu", 0, untraced_s=1e-9)  # any operator runs past twice that
    _pass(model, x)
    part.backward_point(False)  # its mode left here: the rest of the step untraced
    assert _get_current_dispatch_mode_stack() == [] and part.running
    part.at_step("cpu", 0, untraced_s=1e-9, step_s=0.25, step=4)
    (message,) = sent
    assert message["why"].startswith("the count gave up: its step ran past 2× its untraced time")
    assert (message["step_s"], message["step"]) == (0.25, 4) and "flops" not in message
    said = job_count(message, None).message
    assert said.startswith("MFU blank: the step's FLOPs were not counted: the count gave up")
    assert said.endswith("; the count cost the job 0.25 s (its step 4 took 0.25 s against 1e-09 s untraced)")


@pytest.mark.parametrize(("evaluations", "counted"), [(1, True), (3, False)])
def test_a_closure_step_is_counted_over_its_first_evaluation_and_only_if_it_made_one(
    flops_part: Any, evaluations: int, counted: bool
) -> None:
    sent: list[dict[str, Any]] = []
    part = flops_part.StepFlopsCount(torch, sent.append)
    model, x = torch.nn.Linear(16, 16, bias=False), torch.randn(8, 16)
    part.at_step("cpu", 0, untraced_s=10.0)
    _pass(model, x)
    part.backward_point(True)  # the end of the closure's first backward pass
    for _ in range(evaluations - 1):
        _pass(model, x)  # not counted
    part.at_step("cpu", 0, step_s=0.1, evaluations=evaluations)
    (message,) = sent
    if counted:
        assert message["why"] == "" and message["flops"] == 2 * (2 * 8 * 16 * 16)  # a forward, its weight's gradient
    else:
        assert (
            message["why"] == "the optimizer evaluated its closure 3 times in the counted step (LBFGS): not one count"
        )


# -- a job's tracebacks: no frame of gpudash's --------------------------------------------------------
def _no_quiet() -> Any:
    return contextlib.nullcontext()


def _raise_interrupt(*args: Any, **kwargs: Any) -> None:
    raise KeyboardInterrupt


def _frames(exc: BaseException) -> list[str]:
    return [f"{frame.filename}:{frame.name}" for frame in traceback.extract_tb(exc.__traceback__)]


def test_a_wrapped_function_that_raises_leaves_the_frames_it_has_bare() -> None:
    told: list[str] = []
    fake = SimpleNamespace(autograd=SimpleNamespace(backward=_raise_interrupt))
    wraps.wrap_backward(fake, lambda tensors: told.append("start"), lambda: told.append("end"), _no_quiet)
    with pytest.raises(KeyboardInterrupt) as wrapped:
        fake.autograd.backward("loss")
    with pytest.raises(KeyboardInterrupt) as bare:
        _raise_interrupt("loss")
    assert told == ["start"] and _frames(wrapped.value)[1:] == _frames(bare.value)[1:]  # (the test's own line apart)
    assert not [f for f in _frames(wrapped.value) if str(BOOT) in f]


def test_an_uncaught_exception_is_printed_without_gpudashs_frames(monkeypatch: pytest.MonkeyPatch) -> None:
    printed: list[str] = []
    monkeypatch.setattr(sys, "excepthook", lambda kind, exc, tb: printed.append("".join(traceback.format_tb(tb))))
    monkeypatch.setattr(
        threading, "excepthook", lambda args: printed.append("".join(traceback.format_tb(args.exc_traceback)))
    )
    frames.install_excepthooks()
    fake = SimpleNamespace(autograd=SimpleNamespace(grad=_raise_interrupt))
    wraps.quiet_grad(fake, _no_quiet)
    try:
        fake.autograd.grad()
    except KeyboardInterrupt as exc:
        sys.excepthook(KeyboardInterrupt, exc, exc.__traceback__)
    thread = threading.Thread(target=fake.autograd.grad)
    thread.start()
    thread.join()
    assert len(printed) == 2 and all("_raise_interrupt" in p and str(BOOT) not in p for p in printed)
