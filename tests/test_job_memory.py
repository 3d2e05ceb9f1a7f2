"""Issue 64: what a job's memory holds, by kind — parameters, gradients and optimizer state counted
exactly from the optimizer it steps, the activations autograd saves for backward in a sampled step,
the allocator's counters — on ``record``'s stderr and in run.json's ``memory``; the count never
changes what the job computes and leaves autograd's saved-tensor hooks as the job had them."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path
from typing import Any

import pytest
import torch

from gpudash.boot.gpudash_boot import frozen, memory_count
from gpudash.boot.gpudash_boot.tensor_bytes import add_storage, local, storages
from gpudash.core.events import Event
from gpudash.core.memory_note import MemoryNote
from gpudash.diagnosis.out_of_memory import remedies
from gpudash.job.memory import JobMemory
from tests import printed
from tests.test_job import JOBS, gpudash

MEMORY_JOB = str(JOBS / "memory_mlp.py")


@pytest.mark.slow
def test_an_mlp_with_adam_is_counted_as_it_counts_itself(tmp_path: Path) -> None:
    path = tmp_path / "run.csv"
    done = gpudash("record", str(path), "--", "python", MEMORY_JOB, "--steps", "30", timeout=240)
    assert done.returncode == 0, done.stderr
    own = dict(re.findall(r"(\w+)=(\d+)", re.search(r"JOB memory (.*)", done.stdout)[1]))  # type: ignore[index]
    memory = json.loads(path.with_suffix(".json").read_text())["memory"]
    for kind in ("params", "grads", "optimizer"):
        assert memory[f"{kind}_bytes"] == pytest.approx(int(own[kind]), rel=0.01), kind
    assert memory["activations_bytes"] == pytest.approx(int(own["activations"]), rel=0.15)
    assert memory["rss_bytes"] > memory["params_bytes"]
    with open(path, newline="") as f:  # every sample row from the first count on carries the kinds, in MiB
        last = [r for r in csv.DictReader(f) if r["row_kind"] == "sample"][-1]
    assert float(last["mem_params_mib"]) * 2**20 == pytest.approx(int(own["params"]), rel=0.01)
    assert float(last["mem_activations_mib"]) * 2**20 == pytest.approx(int(own["activations"]), rel=0.15)
    said = [
        e.text for e in printed.event_lines(done.stderr, "measured") if e.text.startswith("memory: parameters 6.01 MiB")
    ]
    assert said and "gradients 6.01 MiB · optimizer state 12 MiB · activations 640 KiB" in said[0], done.stderr
    with open(path, newline="") as f:  # the end's figures, the same as said: recorded, not said again
        recorded = [r["event_message"] for r in csv.DictReader(f) if r["event_what"] == "memory"]
    assert len(recorded) == 2 and len(said) == (1 if recorded[0] == recorded[1] else 2), done.stderr
    # the job's line that made them: its model's call (the Linear and ReLU layers' saves are torch's lines)
    lines = Path(MEMORY_JOB).read_text().splitlines()
    at = next(i for i, text in enumerate(lines, 1) if "loss = torch.nn.functional.mse_loss(model(x), y)" in text)
    assert (
        f"the lines that made them: memory_mlp.py:{at} loss = torch.nn.functional.mse_loss(model(x), y) 640 KiB"
        in said[0]
    )
    assert memory["activation_lines"] == [[f"memory_mlp.py:{at} {lines[at - 1].strip()}", 655360]]


@pytest.mark.slow
def test_a_gans_two_optimizers_are_both_counted_and_its_batch_is_one_pass(tmp_path: Path) -> None:
    """The discriminator's optimizer steps first (the job's step), the generator's after it: both
    models' parameters, gradients and Adam state are the job's memory; its two losses' backward
    passes over one batch are not gradient accumulation (what fits is over the whole batch)."""
    path = tmp_path / "run.csv"
    job = ["python", str(JOBS / "gan_memory.py"), "--steps", "30", "--batch", "32"]
    done = gpudash("record", str(path), "--", *job, timeout=240)
    assert done.returncode == 0, done.stderr
    own = dict(re.findall(r"(\w+)=(\d+)", re.search(r"JOB memory (.*)", done.stdout)[1]))  # type: ignore[index]
    memory = json.loads(path.with_suffix(".json").read_text())["memory"]
    assert {kind: memory[f"{kind}_bytes"] for kind in ("params", "grads", "optimizer")} == {
        kind: int(own[kind]) for kind in ("params", "grads", "optimizer")
    }
    assert memory["batch"] == 32 and memory.get("passes", 1) == 1, memory


def _mlp() -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    return model, torch.optim.Adam(model.parameters(), lr=1e-3)


def _train(steps: int, count: Any = None, accumulate: int = 1, batch: int = 4) -> list[float]:
    model, opt = _mlp()
    losses = []
    for step in range(1, steps + 1):
        for _ in range(accumulate):
            x, y = torch.ones(batch, 8) * step, torch.zeros(batch, 1)
            loss = torch.nn.functional.mse_loss(model(x), y) / accumulate
            loss.backward()
            losses.append(float(loss))
        opt.step()
        opt.zero_grad()
        if count is not None:
            count.at_step(step, opt, "cpu")
    return losses


def note(e: Event) -> MemoryNote:
    """A memory event's typed figures."""
    assert isinstance(e.data, MemoryNote), e
    return e.data


def test_the_sampled_step_trains_as_without_it_and_its_largest_pass_is_counted() -> None:
    """Accumulating 3 passes a step: the count is one pass's saved tensors (x 4×8, the ReLU's
    4×16, the output and target 4×1: 112 floats), not three passes'; the losses are the same
    bit for bit, and no saved-tensor hook is left on."""
    memory = memory_count
    count = memory.MemoryCount(torch)
    assert _train(5, count, accumulate=3) == _train(5, accumulate=3)
    assert count.activations == 4 * (8 + 16 + 1 + 1) * 4 and count.activations_step == memory.SAMPLE_AT
    assert count.kinds == {"params": (8 * 16 + 16 + 16 + 1) * 4, "grads": 0, "optimizer": 2 * 161 * 4 + 2 * 4 * 2}
    assert torch._C._autograd._top_saved_tensors_default_hooks(True) is None


def test_a_jobs_own_saved_tensor_hooks_are_left_alone() -> None:
    memory = memory_count
    count = memory.MemoryCount(torch)
    with torch.autograd.graph.save_on_cpu():
        _train(4, count)
        assert torch._C._autograd._top_saved_tensors_default_hooks(True) is not None  # the job's, still on
    assert torch._C._autograd._top_saved_tensors_default_hooks(True) is None
    assert count.activations is None and "saved-tensor hooks are on" in count.not_measured
    assert "activations_not_measured" in (count.message(0) or {})


def test_the_memory_line_reads_the_allocator_against_the_gpus_total() -> None:
    memory = JobMemory()
    gib = 1 << 30
    memory.received({"step": 3, "params": 2 * gib, "grads": 2 * gib, "optimizer": 4 * gib})
    assert memory.event(1.0) is None  # the activations not known yet
    counters = {
        "allocated": int(30 * gib),
        "reserved": int(34 * gib),
        "peak": int(41.2 * gib),
        "total": int(79.6 * gib),
    }
    memory.received(
        {
            "step": 9,
            "params": 2 * gib,
            "grads": 2 * gib,
            "optimizer": 4 * gib,
            "activations": 25 * gib,
            "activations_step": 3,
            **counters,
        }
    )
    said = memory.event(2.0)
    assert said is not None and memory.event(3.0) is None  # said once; the end's comes with final()
    assert said.message == (
        "memory: parameters 2 GiB · gradients 2 GiB · optimizer state 4 GiB · activations 25 GiB · "
        "peak allocated 41.2 GiB of 79.6 GiB · reserved 34 GiB (4 GiB not allocated) "
        "(activations: saved for backward in step 3)"
    )
    assert note(said).counters["peak"] == int(41.2 * gib) and note(said).counters["total"]


@pytest.mark.slow
def test_a_job_that_dies_out_of_memory_is_told_where_with_what_and_what_would_free_it(tmp_path: Path) -> None:
    """Its step 12 fails as CUDA's allocator fails (torch's OutOfMemoryError, its message): gpudash's
    last words name the job's line, the step and phase, the memory by kind and the remedies by the
    bytes each frees; the job's own traceback and exit status stay as they are."""
    path = tmp_path / "run.csv"
    job = ["python", MEMORY_JOB, "--steps", "40", "--oom-at", "12"]
    done = gpudash("record", str(path), "--", *job, timeout=240)
    assert "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB" in done.stderr  # the job's own
    assert "crashed: the job exited with code 1" in done.stderr
    told = re.search(r"error: (out of memory at .*)", done.stderr)
    assert told, done.stderr
    line = next(
        i
        for i, text in enumerate(Path(MEMORY_JOB).read_text().splitlines(), 1)
        if "raise torch.OutOfMemoryError" in text
    )
    assert f"memory_mlp.py:{line} (step 12, training): raise torch.OutOfMemoryError(" in told[1]
    assert "it tried to allocate 2 GiB; parameters 6.01 MiB · gradients 6.01 MiB · optimizer state 12 MiB" in told[1]
    assert "; the lines that made them: memory_mlp.py:" in told[1] and "mse_loss(model(x), y) 640 KiB" in told[1]
    freed = re.findall(r"\(about ([\d.]+) (MiB|KiB)\)", told[1].split("largest first: ")[1])
    sizes = [float(n) * (1024 if unit == "MiB" else 1) for n, unit in freed]
    assert len(sizes) == 4 and sizes == sorted(sizes, reverse=True), told[1]
    kept = json.loads(path.with_suffix(".json").read_text())["out_of_memory"]
    assert kept["step"] == 12 and kept["phase"] == "training" and kept["message"] == told[1]


@pytest.mark.slow
def test_an_out_of_memory_error_that_ends_a_thread_of_the_job_is_told_with_the_threads_name(tmp_path: Path) -> None:
    """The job trains in a thread of its own, which the error ends (threading's own traceback);
    the main thread exits 0, and gpudash still says where and in which thread."""
    job = ["python", MEMORY_JOB, "--steps", "40", "--oom-at", "12", "--thread"]
    done = gpudash("record", str(tmp_path / "run.csv"), "--", *job, timeout=240)
    assert "Exception in thread trainer" in done.stderr and "torch.OutOfMemoryError" in done.stderr  # the job's own
    told = re.search(r"error: (out of memory at .*)", done.stderr)
    assert told and "memory_mlp.py:" in told[1] and "(thread trainer, step 12, training)" in told[1], done.stderr


def test_a_torchrun_jobs_batch_and_what_fits_are_said_a_rank() -> None:
    """Its summary names the world's batch (bs64 of two ranks of 32): the memory line says its figures
    are a rank's."""
    gib = 1 << 30
    memory = JobMemory()
    counters = {"allocated": 30 * gib, "reserved": 44 * gib, "peak": int(41.2 * gib), "total": int(79.6 * gib)}
    figures = {"params": 2 * gib, "grads": 2 * gib, "optimizer": 4 * gib, "activations": int(25.6 * gib)}
    memory.received({**figures, "activations_step": 3, **counters, "reserved_peak": 44 * gib})
    said = memory.final(9.0, batch=32, ranks=2)
    assert said is not None and "at batch 32 a rank: batch up to about 61 a rank fits" in said.message
    alone = memory.final(9.0, batch=32)
    assert alone is not None and "at batch 32: batch up to about 61 fits" in alone.message


def test_what_fits_is_bounded_by_what_other_processes_hold_of_the_gpu() -> None:
    """As below (61 fit on an empty GPU), but the driver has 15.6 GiB free beside the job's 44 GiB
    reserved: 20 GiB of the GPU is held outside its allocator, so 59.6 GiB is all it could hold:
    (59.6 − 8) / 1.125 → 45, and the line says why."""
    gib = 1 << 30
    memory = JobMemory()
    counters = {"allocated": 30 * gib, "reserved": 44 * gib, "peak": int(41.2 * gib), "total": int(79.6 * gib)}
    counters |= {"reserved_peak": 44 * gib, "free": int(15.6 * gib)}
    figures = {"params": 2 * gib, "grads": 2 * gib, "optimizer": 4 * gib, "activations": int(25.6 * gib)}
    memory.received({**figures, "activations_step": 3, **counters})
    said = memory.final(9.0, batch=32)
    assert said is not None and note(said).fits_batch == 45
    assert "about 45 fits (1.12 GiB a sample at the peak), with 20 GiB of the GPU held outside" in said.message
    memory.received({**figures, "activations_step": 3, **counters, "free": int(34 * gib)})  # only CUDA's context
    said = memory.final(10.0, batch=32)
    assert said is not None and note(said).fits_batch == 61 and "held outside" not in said.message


def test_remedies_are_those_the_job_lacks_largest_first() -> None:
    gib = 1 << 30
    m = {
        "params": 2 * gib,
        "grads": 2 * gib,
        "optimizer": 8 * gib,
        "activations": 40 * gib,
        "half_share": 0.0,
        "allocated": 60 * gib,
        "reserved": 72 * gib,
        "total": 80 * gib,
        "alloc_conf": "",
    }
    found = [r.what.split(" ")[0] for r in remedies(m)]
    assert found == ["activation", "bf16", "half", "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True", "the"]
    mixed = {**m, "half_share": 0.9, "alloc_conf": "expandable_segments:True"}  # it has both already
    assert [r.what.split(" ")[0] for r in remedies(mixed)] == ["activation", "half", "the"]
    before_the_first_step = {"params": gib, "grads": 0, "optimizer": 0, "allocated": 30 * gib, "total": 80 * gib}
    assert remedies(before_the_first_step)[0].frees == int(29 * gib * 0.7)  # the rest of allocated is activations
    assert "if it has none" in remedies(before_the_first_step)[1].what  # no step sampled: autocast not known


def test_what_fits_is_the_gpu_less_the_fixed_part_over_what_the_peak_holds_a_sample() -> None:
    """The allocator reserved 44 GiB at its peak at batch 32; parameters, gradients and optimizer
    state (8 GiB) do not grow with the batch, the rest (36 GiB: activations, backward's temporaries,
    the cache's splits) does: 1.125 GiB a sample. 3% of 79.6 GiB for CUDA's context: (77.2 − 8) /
    1.125 → 61. (On an H100, a GPT-style job at batch 16 read 51 this way against 50 that really
    fitted, where the activations alone a sample said 87: docs/memory.md.) With 4 passes a step
    (gradient accumulation) a pass is 8 samples, and what fits is a pass's batch. Without the
    reserved peak (an older job's hooks), the allocated peak."""
    gib = 1 << 30
    memory = JobMemory()
    counters = {"allocated": 30 * gib, "reserved": 44 * gib, "peak": int(41.2 * gib), "total": int(79.6 * gib)}
    counters["reserved_peak"] = 44 * gib
    figures = {"params": 2 * gib, "grads": 2 * gib, "optimizer": 4 * gib, "activations": int(25.6 * gib)}
    memory.received({**figures, "activations_step": 3, **counters})
    said = memory.final(9.0, batch=32)
    assert said is not None and note(said).fits_batch == 61
    assert note(said).counters["reserved_peak"] == 44 * gib
    fits = (
        "peak allocated 41.2 GiB of 79.6 GiB at batch 32: batch up to about 61 fits (1.12 GiB a sample at the "
        "peak) · reserved at the peak 44 GiB, 2.8 GiB more than allocated"
    )
    assert fits in said.message
    memory.received({**figures, "activations_step": 3, "passes": 4, **counters})
    accumulating = memory.final(9.0, batch=32)
    assert accumulating is not None and note(accumulating).fits_batch == 15 and "at batch 8:" in accumulating.message
    older = JobMemory()
    older.received({**figures, "activations_step": 3, **{k: v for k, v in counters.items() if k != "reserved_peak"}})
    assert note(older.final(9.0, batch=32) or said).fits_batch == 66
    unsampled = JobMemory()
    unsampled.received({**{k: v for k, v in figures.items() if k != "activations"}, **counters})
    assert "fits_batch" not in (unsampled.final(9.0, batch=32) or said).details  # its passes not known
    cpu = JobMemory()
    cpu.received({"params": gib, "grads": gib, "optimizer": gib, "activations": gib, "rss": 8 * gib})
    assert "fits" not in (cpu.final(1.0, batch=32) or said).message  # no GPU to fill
    hostile = JobMemory()
    hostile.received({"params": float("inf"), "grads": float("nan"), "optimizer": 1e400, "activations": -5})
    assert hostile.figures is not None and hostile.figures.kinds == {}  # no figure from numbers that are not


def test_a_sampled_step_with_torch_func_or_a_graph_never_backpropagated_goes_as_without_gpudash() -> None:
    """torch.func.grad refuses saved-tensor hooks: in the sampled step the count stops and the job's
    call goes on; a forward whose graph is dropped without backward (an op that saves its output)
    is freed at once, as it is without hooks."""
    import weakref

    memory = memory_count
    count = memory.MemoryCount(torch)
    original = torch.autograd.graph.disable_saved_tensors_hooks
    _, opt = _mlp()
    count.at_step(memory.SAMPLE_AT - 1, opt, "cpu")  # the sampled step begins
    assert count.capturing
    dropped = (torch.randn(100, requires_grad=True) * 2).exp()  # exp saves its own output
    alive = weakref.ref(dropped)
    del dropped
    assert alive() is None
    grads = torch.func.grad(lambda t: t.sin().sum())(torch.zeros(3))
    assert torch.equal(grads, torch.ones(3))
    count.at_step(memory.SAMPLE_AT, opt, "cpu")
    assert count.activations is None and "torch.func" in count.not_measured
    assert torch.autograd.graph.disable_saved_tensors_hooks is original
    assert torch._C._autograd._top_saved_tensors_default_hooks(True) is None


@pytest.mark.slow
def test_a_frozen_teachers_parameters_are_counted_to_the_byte_apart_from_the_trained_ones(tmp_path: Path) -> None:
    """A distillation's teacher holds memory no optimizer steps: counted once a storage (its tied
    layers), the modules the step never calls left out, said as frozen parameters and kept in
    run.json beside the student's parameters."""
    path = tmp_path / "run.csv"
    done = gpudash("record", str(path), "--", "python", str(JOBS / "distill_frozen.py"), "--steps", "30", timeout=240)
    assert done.returncode == 0, done.stderr
    own = dict(re.findall(r"(\w+)=(\d+)", re.search(r"JOB memory (.*)", done.stdout)[1]))  # type: ignore[index]
    memory = json.loads(path.with_suffix(".json").read_text())["memory"]
    assert (memory["frozen_bytes"], memory["params_bytes"]) == (int(own["frozen"]), int(own["params"]))
    said = [e.text for e in printed.event_lines(done.stderr, "measured") if e.text.startswith("memory: ")]
    assert said and "frozen parameters 769 KiB · gradients" in said[0], done.stderr


def test_frozen_parameters_are_fixed_memory_in_what_fits() -> None:
    """A frozen base (16 GiB) does not grow with the batch: it joins the fixed part, and what the peak
    holds a sample is the rest's — 20 GiB over 32 samples, so (77.2 − 24) / 0.625 → 85 fit, where
    counted as a batch's it read 61."""
    gib = 1 << 30
    memory = JobMemory()
    counters = {"allocated": 30 * gib, "reserved": 44 * gib, "peak": int(41.2 * gib), "total": int(79.6 * gib)}
    figures = {"params": 2 * gib, "grads": 2 * gib, "optimizer": 4 * gib, "activations": 10 * gib}
    memory.received({**figures, "frozen": 16 * gib, "activations_step": 3, **counters, "reserved_peak": 44 * gib})
    said = memory.final(9.0, batch=32)
    assert said is not None and note(said).fits_batch == 85 and note(said).kinds["frozen"] == 16 * gib
    assert said.message.startswith("memory: parameters 2 GiB · frozen parameters 16 GiB · gradients 2 GiB")


@pytest.mark.slow
def test_a_job_whose_batches_vary_has_its_memory_told_at_its_largest_batch(tmp_path: Path) -> None:
    """A bucketing sampler's batches of 8 to 256 samples: the peak, and what fits, come at the largest
    (256), not at the most common of the first steps' (which the summary's batch still reads)."""
    path = tmp_path / "run.csv"
    job = str(JOBS / "varied_batches.py")
    done = gpudash("record", str(path), "--", "python", job, "--rounds", "12", timeout=240)
    assert done.returncode == 0, done.stderr
    memory = json.loads(path.with_suffix(".json").read_text())["memory"]
    assert memory["batch"] == int(re.search(r"JOB largest=(\d+)", done.stdout)[1])  # type: ignore[index]


def test_a_ranks_largest_batch_leaves_its_first_step_out() -> None:
    """A framework that fetches a batch ahead counts two batches in its first step: not a batch."""
    from gpudash.job.step_record import StepRecord
    from gpudash.job.steps import RankWindows

    rank = RankWindows()
    for step, samples in enumerate((64, 32, 32, 16, 32), start=1):
        rank.add(StepRecord(step, float(step), 10.0, samples, 0, 0.0, 0, False))
    assert (rank.largest, rank.batch_size) == (32, 32)


def test_frozen_parameters_are_those_the_step_calls_that_need_no_grad_and_leave_when_unfrozen() -> None:
    """Of the modules a step calls: a frozen layer counts, one that requires grad (a framework's own
    fp32 copies train it) does not, a module never called does not; unfrozen later and given to an
    optimizer, the layer leaves the count."""
    base, untrained, head = torch.nn.Linear(8, 8), torch.nn.Linear(8, 8), torch.nn.Linear(8, 100)
    base.requires_grad_(False)
    head.requires_grad_(False)  # frozen too, but not the step's
    adapter = torch.nn.Linear(8, 8)
    opt = torch.optim.SGD(adapter.parameters(), lr=0.1)
    watch = frozen.ModulesCalled(torch, "cpu", local)
    adapter(untrained(base(torch.randn(2, 8))))  # the head is never called
    found = watch.frozen()
    base_bytes = (8 * 8 + 8) * 4
    assert frozen.frozen_bytes(found, storages(opt), add_storage) == base_bytes
    base.requires_grad_(True)
    opt.add_param_group({"params": list(base.parameters())})
    assert frozen.frozen_bytes(found, storages(opt), add_storage) == 0
    adapter(torch.randn(2, 8))  # the watch is closed: nothing more noted
    assert not watch.modules and watch.handle is None
