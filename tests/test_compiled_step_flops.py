"""A compiled job's model FLOPs, counted by the hooks' count (``gpudash_boot.step_flops`` with
``compiled_flops``) inside this process: ``torch.compile`` noted and given back; a compiled module,
one compiled in place or by its forward, and a data-parallel model compiled whole counted as their
eager model on fake tensors, training as before; a compiled function not counted, saying why; a model
compiled in parts counted over the next step run eagerly. (``tests/test_job_flops.py``: the eager
count and the real command.)"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils import flop_counter


@pytest.mark.usefixtures("compiles_forgotten")
def test_torch_compile_is_noted_and_given_back_and_a_compiled_modules_step_is_counted(flops_sent: Any) -> None:
    part, messages = flops_sent
    original = torch.compile
    part.install()
    try:
        assert torch.compile is not original
        compiled = torch.compile(torch.nn.Linear(2, 2), backend="eager")
        assert compiled is not None and part.compiled
        part.at_step("cpu", 0, untraced_s=0.01)  # its next step's compiled forward calls are kept
        compiled(torch.randn(4, 2)).sum().backward()
        part.at_step("cpu", 0, untraced_s=0.01)
    finally:
        part.close()
    assert torch.compile is original and not part.running
    (message,) = messages
    assert message["why"] == "" and message["flops"] == 2 * (2 * 4 * 2 * 2)  # forward, and the weight's gradient
    assert message["how"].startswith("the uncompiled model's forward and backward on fake tensors")


@pytest.mark.usefixtures("compiles_forgotten")
def test_a_compiled_function_is_not_counted_and_says_why(flops_sent: Any) -> None:
    part, messages = flops_sent
    part.install()

    def loss_of(x: torch.Tensor) -> torch.Tensor:
        return (x * 2).sum()

    torch.compile(loss_of, backend="eager")
    part.at_step("cpu", 0)
    part.close()
    assert [m["why"] for m in messages] == [
        "the job compiled a function (loss_of), not a module (the counter sees eager operators only)"
    ]


@pytest.mark.usefixtures("compiles_forgotten")
@pytest.mark.parametrize("how", ["Module.compile", "forward"])
def test_a_module_compiled_in_place_or_by_its_forward_is_counted_and_trains_as_before(
    flops_sent: Any, how: str
) -> None:
    """``model.compile()`` and ``model.forward = torch.compile(model.forward)``: the job's calls go
    through gpudash's wrapper of the compiled code, the step is counted on the uncompiled method, and
    the model gives the same output and gradients as uncompiled."""
    part, messages = flops_sent
    part.install()
    torch.manual_seed(0)
    model, twin = torch.nn.Linear(2, 3), torch.nn.Linear(2, 3)
    twin.load_state_dict(model.state_dict())
    try:
        if how == "Module.compile":
            model.compile(backend="eager")
        else:
            model.forward = torch.compile(model.forward, backend="eager")  # type: ignore[method-assign]
        part.at_step("cpu", 0, untraced_s=0.01)
        x = torch.randn(4, 2)
        out = model(x)
        out.sum().backward()
        part.at_step("cpu", 0, untraced_s=0.01)
    finally:
        part.close()
    expected = twin(x)
    expected.sum().backward()
    assert torch.equal(out, expected) and model.weight.grad is not None and twin.weight.grad is not None
    assert torch.equal(model.weight.grad, twin.weight.grad)
    (message,) = messages
    assert message["why"] == "" and message["flops"] == 2 * (2 * 4 * 2 * 3)  # forward, and the weight's gradient


@pytest.mark.usefixtures("compiles_forgotten")
def test_a_data_parallel_model_compiled_whole_is_counted_as_its_model(flops_sent: Any, tmp_path: Path) -> None:
    """``torch.compile(DDP(model))`` (a world of one, gloo): the count runs the model inside the
    wrapper, whose forward on fake tensors would broadcast its buffers."""
    part, messages = flops_sent
    torch.distributed.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        part.install()
        model = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.BatchNorm1d(3))
        compiled = torch.compile(torch.nn.parallel.DistributedDataParallel(model), backend="eager")
        part.at_step("cpu", 0, untraced_s=0.01)
        compiled(torch.randn(4, 2)).sum().backward()
        part.at_step("cpu", 0, untraced_s=0.01)
        part.close()
    finally:
        torch.distributed.destroy_process_group()
    (message,) = messages
    assert message["why"] == "" and message["flops"] >= 2 * (2 * 4 * 2 * 3), message


def _compiled_in_parts() -> tuple[torch.nn.Module, torch.nn.Module, torch.optim.Optimizer, Callable[[], None]]:
    """Two blocks compiled one by one and an eager head holding most of the parameters (the
    optimizer steps all): the blocks, the head, the optimizer and one training step."""
    blocks = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 4))
    head = torch.nn.Linear(4, 64)
    compiled = [torch.compile(block, backend="eager") for block in blocks]
    optimizer = torch.optim.SGD([*blocks.parameters(), *head.parameters()], lr=0.1)

    def step() -> None:
        x = torch.randn(2, 4)
        for block in compiled:
            x = block(x)
        head(x).sum().backward()

    return blocks, head, optimizer, step


def _compiles_again() -> bool:
    """torch compiles a new function now (not held in the force_eager stance)."""
    compiles: list[int] = []

    def counting(graph: torch.fx.GraphModule, _inputs: Any) -> Any:
        compiles.append(1)
        return graph.forward

    assert torch.compile(lambda t: t * 2, backend=counting)(torch.ones(2)).tolist() == [2.0, 2.0]
    return compiles == [1]


@pytest.mark.usefixtures("compiles_forgotten")
def test_a_model_compiled_block_by_block_with_an_eager_head_is_counted_over_the_next_step_run_eagerly(
    flops_sent: Any,
) -> None:
    """The blocks compiled one by one, the head left eager (the optimizer steps both): the compiled
    blocks alone would leave the head out, so the step after is counted whole, its compiled code run
    uncompiled for it, and the count is what torch's own counter gives the eager model; the blocks
    run compiled again after it."""
    part, messages = flops_sent
    part.install()
    blocks, head, optimizer, step = _compiled_in_parts()
    for _ in range(3):  # the blocks' calls kept over one step, then the next counted eagerly
        part.at_step("cpu", 0, untraced_s=0.01, optimizer=optimizer)
        step()
    part.at_step("cpu", 0, untraced_s=0.01, optimizer=optimizer)
    assert _compiles_again()  # the count's eager stance was let go at its end
    part.close()
    with flop_counter.FlopCounterMode(display=False) as reference:
        x = torch.randn(2, 4)
        head(blocks(x)).sum().backward()
    (message,) = messages
    assert message["why"] == "" and message["flops"] == reference.get_total_flops(), message
    assert message["how"] == (
        "the step run eagerly (torch.compiler.set_stance('force_eager')): the job compiled part of its model "
        "(the compiled modules hold 11% of the parameters its optimizer steps)"
    )


@pytest.mark.usefixtures("compiles_forgotten")
def test_a_step_run_eagerly_for_the_count_that_ends_on_another_thread_gives_the_compiled_code_back(
    flops_sent: Any,
) -> None:
    """The count gives up when the counted step ends on another thread; once its mode is left at the
    next step boundary of its own thread, the job runs compiled again (no eager stance left behind)."""
    part, messages = flops_sent
    part.install()
    _, _, optimizer, step = _compiled_in_parts()
    for _ in range(2):
        part.at_step("cpu", 0, untraced_s=0.01, optimizer=optimizer)
        step()
    other = threading.Thread(target=part.at_step, args=("cpu", 0), kwargs={"untraced_s": 0.01, "optimizer": optimizer})
    other.start()
    other.join()
    part.at_step("cpu", 0, untraced_s=0.01, optimizer=optimizer)  # the count's mode left on its own thread
    step()
    assert _compiles_again()
    part.close()
    (message,) = messages
    assert message["why"] == "the second optimizer step ran on another thread than the first"
