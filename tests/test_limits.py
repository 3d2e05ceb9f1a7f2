"""Limits before work and the memory guard (issue 11, failures 1 and 2): a batch size is checked
against the dataset, the family's cap and the memory it would need before it is applied; the
workload process runs under a data limit, so a runaway allocation is reported, not OOM-killed."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import resource
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from gpudash.cli.main import main
from gpudash.core import memguard
from gpudash.core.protocol import Event, EventKind, Message, RunConfig, SetBatchSize
from gpudash.engine.loop import StepLoop
from gpudash.host.runner import WorkloadRunner
from tests.helpers import GPUDASH, build_as
from tests.test_orphans import START_TIMEOUT_S, until_event
from workloads import limits, memory_probe
from workloads.base import WorkloadOptions
from workloads.catalog_types import WorkloadError
from workloads.factory import build
from workloads.registry import FAMILIES


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    """gpudash's exit status and its stderr lines."""
    try:
        code = main(argv)
    except SystemExit as exc:
        code = int(exc.code or 0)
    return code, capsys.readouterr().err.strip().splitlines()


# -- fixed limits, before anything starts --------------------------------------------------------------
@pytest.mark.parametrize(
    ("family", "batch", "says"),
    [
        ("input_pipeline", "20000", "batch 20000 is larger than the dataset (10000 samples)"),
        ("input_pipeline", "1000000000", "batch 1000000000 is larger than the dataset (10000 samples)"),
        ("encdec", "1000000000", "batch 1000000000 is over encdec's limit of 4096"),
    ],
)
def test_record_refuses_a_batch_over_the_fixed_limits_before_starting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], family: str, batch: str, says: str
) -> None:
    csv = tmp_path / "run.csv"
    code, err = run_cli(["--record", str(csv), "-w", family, "-b", batch, "--device", "cpu"], capsys)
    assert (code, err) == (2, [f"gpudash: error: {says}"])
    assert not csv.exists()  # nothing started, nothing written


def test_sweep_refuses_a_batch_over_the_fixed_limits(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run_cli(
        ["sweep", "-w", "input_pipeline", "-b", "16,20000", "--device", "cpu", "--out", str(tmp_path / "out")], capsys
    )
    assert (code, err) == (2, ["gpudash: error: batch 20000 is larger than the dataset (10000 samples)"])


def test_every_family_has_a_cap_and_only_the_input_pipeline_a_dataset() -> None:
    for info in FAMILIES.values():
        assert info.batch_refusal(info.max_batch_size) is None
        assert info.batch_refusal(info.max_batch_size + 1) is not None
    assert [name for name, info in FAMILIES.items() if info.dataset_size is not None] == ["input_pipeline"]
    assert FAMILIES["input_pipeline"].batch_refusal(2501, ranks=4) == (
        "batch 2501 is larger than each of 4 ranks' share of the dataset (2500 samples)"
    )


# -- from the dashboard: refused, and the run goes on ----------------------------------------------------
def run_with(workload: object, control: object, after_steps: int, steps: int) -> tuple[StepLoop, list[Message]]:
    """Run ``steps`` steps, handing ``control`` to the loop once it has issued ``after_steps``."""
    got: list[Message] = []
    pending = [control]
    loop: StepLoop

    def controls(timeout: float) -> object:
        if pending and loop.steps_issued >= after_steps:
            return pending.pop()
        return None

    loop = StepLoop(workload, emit=got.append, controls=controls, sample_interval_s=0.05, max_steps=steps)  # type: ignore[arg-type]
    loop.run()
    return loop, got


def test_the_dashboards_batch_larger_than_the_dataset_is_refused_and_the_run_goes_on() -> None:
    """The batch prompt's SetBatchSize(20000) used to crash the workload with StopIteration."""
    with build("input_pipeline", "cpu", WorkloadOptions(batch_size=4, image_size=16, workers=0)) as w:
        loop, got = run_with(w, SetBatchSize(20000), after_steps=2, steps=6)
        errors = [m for m in got if isinstance(m, Event) and m.kind == EventKind.ERROR]
        assert [(e.what, e.message) for e in errors] == [
            ("batch_size", "batch 20000 is larger than the dataset (10000 samples)")
        ]
        assert loop.steps_issued == 6 and w.batch_size == 4


# -- memory ----------------------------------------------------------------------------------------------
def vm_data() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmData:"))


@contextlib.contextmanager
def data_room(room: int) -> Iterator[int]:
    """This process under a data limit ``room`` bytes above what it uses now (as the memory
    guard puts the workload process); the limit, then the old one back."""
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    limit = vm_data() + room
    resource.setrlimit(resource.RLIMIT_DATA, (limit, hard))
    try:
        yield limit
    finally:
        resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))


def test_a_batch_that_would_not_fit_in_host_memory_is_refused_with_the_estimate() -> None:
    with build("encdec", "cpu", WorkloadOptions(batch_size=4, image_size=64)) as w:
        with data_room(512 * 2**20):
            with pytest.raises(WorkloadError) as refused:
                w.check_change(batch_size=4096)
            assert w.check_change(batch_size=16)[1] == 16  # a batch that fits is not refused
        step = w.step_memory()
    message = str(refused.value)
    assert message.startswith("batch 4096 needs about ") and "of host memory (batches held" in message
    assert f"{step.how()})" in message and "left under the workload's memory limit" in message
    assert step.probed == (1, 4) and step.per_sample > 0
    assert w.batch_size == 4


def test_a_first_batch_that_would_not_fit_is_refused_and_its_loader_stopped() -> None:
    """Above the family's default the first configuration is measured before it is built.

    The room (256 MiB) must hold building the default configuration and probing it, which
    ``python -m benchmarks run refusal_heap_growth`` measures (docs/bench/cpu-limits/): at 64 px after the
    warm-up below, about 20 MiB. At 256 px without it, about 270 MiB: the test passed only where
    earlier tests had left freed heap behind, and failed on CI's fresh machine."""
    options = WorkloadOptions(batch_size=4000, image_size=64, workers=2)
    with build("input_pipeline", "cpu", replace(options, batch_size=4, workers=0)) as warm:
        warm.step()  # first use of torch here (threads, oneDNN's kernels) kept out of the measured room
    with data_room(256 * 2**20), pytest.raises(WorkloadError, match=r"^batch 4000 needs about .* of host memory"):
        build("input_pipeline", "cpu", options)
    assert multiprocessing.active_children() == []  # the loader of the measuring configuration is gone


def test_the_probe_trains_nothing() -> None:
    """Measuring a step puts back the parameters, the optimizer's state and the generators."""
    from workloads.augment import AugmentWorkload

    with build_as(AugmentWorkload, "augment", "cpu", WorkloadOptions(variant="gpu", batch_size=4, image_size=32)) as w:
        w.step()
        before = [p.detach().clone() for p in w.trained_parameters()]
        gen_state = w.gen.get_state()
        w.step_memory()
        assert all((p == b).all() for p, b in zip(w.trained_parameters(), before, strict=False))
        assert (w.gen.get_state() == gen_state).all()


# -- the memory guard --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "ram", "limit"),
    [
        ("80%", 10 * 2**30, 8 * 2**30),
        ("12G", None, 12 * 2**30),
        ("512M", None, 512 * 2**20),
        ("1.5GiB", None, 3 * 2**29),
        ("off", 10 * 2**30, None),
    ],
)
def test_memory_limit_settings(text: str, ram: int | None, limit: int | None) -> None:
    assert memguard.parse_limit(text, ram) == limit


@pytest.mark.parametrize("text", ["lots", "0%", "150%", "-3G"])
def test_a_bad_memory_limit_setting_is_one_line(text: str) -> None:
    with pytest.raises(ValueError, match=f"^{memguard.ENV}="):
        memguard.parse_limit(text, 10 * 2**30)


@pytest.mark.slow
def test_a_runaway_allocation_is_reported_as_out_of_host_memory(tmp_path: Path) -> None:
    """sync_loss at 1024 px needs ~4 GiB a step on the CPU; under a 1.5 GiB guard (room for torch,
    and an early failure in the first step) the workload process fails inside, reports it, and
    ``--record`` exits 1 (before: it used what it liked)."""
    env = {**os.environ, memguard.ENV: "1.5G"}
    argv = ["--record", str(tmp_path / "run.csv"), "-w", "sync_loss", "--device", "cpu", "--image-size", "1024"]
    out = subprocess.run(
        [*GPUDASH, *argv, "--steps", "2"], env=env, capture_output=True, text=True, timeout=START_TIMEOUT_S
    )
    assert out.returncode == 1, out.stderr
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("gpudash: error: workload failed: out of host memory: torch could not allocate")
    assert f"(the workload process may use 1.5 GiB: {memguard.ENV}=1.5G)" in last


def test_out_of_host_memory_messages() -> None:
    assert (memguard.out_of_memory_message(MemoryError()) or "").startswith("out of host memory: an allocation failed")
    torch_error = RuntimeError(
        "[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate "
        "memory: you tried to allocate 6442450944 bytes. Error code 12"
    )
    assert (memguard.out_of_memory_message(torch_error) or "").startswith(
        "out of host memory: torch could not allocate 6 GiB"
    )
    assert memguard.out_of_memory_message(ValueError("no")) is None


@pytest.mark.slow
def test_a_sigkill_at_high_rss_is_reported_as_probably_out_of_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the OOM killer does, done by hand: with "high" at 0% of the RAM any SIGKILL reads as
    probably out of memory, with its RSS. (At the real threshold a small workload's does not:
    tests/test_orphans.py's SIGKILLed workloads, through the same runner.)"""
    monkeypatch.setattr(memguard, "OOM_SUSPECT_SHARE", 0.0)
    runner = WorkloadRunner(RunConfig(workload="encdec", device="cpu", image_size=16), log_path=tmp_path / "child.log")
    runner.start()
    try:
        until_event(runner, EventKind.STARTED)  # meanwhile poll() has sampled its RSS
        assert runner.pid is not None
        os.kill(runner.pid, signal.SIGKILL)
        message = until_event(runner, EventKind.CRASHED).message
    finally:
        runner.stop()
    assert "workload process killed by SIGKILL — probably out of memory (RSS " in message and " GiB)" in message


# -- on a GPU (the lead runs: pytest -q -m gpu tests/test_limits.py) ---------------------------------------
@pytest.mark.gpu
def test_the_memory_guard_lets_a_cuda_run_train(tmp_path: Path) -> None:
    """RLIMIT_DATA (not RLIMIT_AS) leaves the CUDA driver's address-space reservations alone."""
    runner = WorkloadRunner(RunConfig(workload="encdec", device="cuda", max_steps=50), log_path=tmp_path / "child.log")
    runner.start()
    try:
        until_event(runner, EventKind.STARTED)
        with open(f"/proc/{runner.pid}/limits") as f:
            data = next(line for line in f if line.startswith("Max data size"))
        assert data.split()[3] != "unlimited"  # the guard is on
        stopped = until_event(runner, EventKind.STOPPED)
    finally:
        runner.stop()
    assert stopped.details.get("batch_size")


@pytest.mark.gpu
def test_a_batch_that_would_not_fit_on_the_gpu_is_refused() -> None:
    with build("encdec", "cuda", WorkloadOptions(batch_size=8, image_size=1024)) as w:
        with pytest.raises(WorkloadError, match=r"^batch 2048 needs about .* of GPU memory .* free on cuda:\d"):
            w.check_change(batch_size=2048)
        assert w.check_change(batch_size=16)[1] == 16


def test_a_temp_dir_too_long_for_the_workloads_sockets_is_refused_in_one_line(tmp_path: Path) -> None:
    """Under a TMPDIR of 100 bytes the input pipeline's loader workers could not hand over their
    tensors (AF_UNIX path too long) and the run stalled for good; now it does not start."""
    long_dir = tmp_path / ("t" * max(1, 100 - len(str(tmp_path)) - 1))
    long_dir.mkdir()
    assert len(str(long_dir)) >= 100
    env = {**os.environ, "TMPDIR": str(long_dir)}
    r = subprocess.run(
        [*GPUDASH, "record", "x.csv", "-w", "input_pipeline", "--device", "cpu", "--steps", "3"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2 and r.stdout == ""
    (line,) = r.stderr.splitlines()
    assert line.startswith("gpudash: error: the temp dir ") and "set TMPDIR to a shorter directory" in line
    assert not (tmp_path / "x.csv").exists()
    # the limit is the socket's: TMPDIR plus multiprocessing's 32 characters within 107 bytes
    from gpudash.host.host_budget import MAX_TEMP_DIR_BYTES, HostBudgetError, check_temp_dir

    check_temp_dir("/" + "d" * (MAX_TEMP_DIR_BYTES - 1))
    with pytest.raises(HostBudgetError):
        check_temp_dir("/" + "d" * MAX_TEMP_DIR_BYTES)


MIB = 2**20


def test_a_workspace_taken_at_some_probe_sizes_does_not_inflate_the_estimate() -> None:
    """The H100 case: a small network's peak grew 66 MiB a sample from 1 to 4 samples (cuDNN took a
    workspace at 4, not at 1), so batch 2048 'needed 132 GiB'. The activations set the slope."""
    per_sample, workspace = 1 * MIB, 200 * MIB
    sizes = [1, 4, 16]
    activations: list[float] = [per_sample * n for n in sizes]
    peaks: list[float] = [per_sample * 1, per_sample * 4 + workspace, per_sample * 16 + workspace]
    step = limits.StepMemory.fit(sizes, peaks, activations)
    assert step.per_sample == per_sample and step.fixed == workspace
    assert step.at(2048) == 2048 * per_sample + workspace
    assert step.how() == "1 MiB a sample, measured at batch 1, 4 and 16"


def test_a_workspace_that_comes_and_goes_does_not_hide_the_samples_cost() -> None:
    """encdec at 1024 px on an H100: a large workspace at 4 samples, none at 8, 1 GiB a sample.
    A line through the peaks would say 16 MiB a sample and let batch 2048 through."""
    gib = 2**30
    sizes = [1, 4, 8]
    step = limits.StepMemory.fit(sizes, [1.0 * gib, 7.9 * gib, 8.0 * gib], [1.0 * gib * n for n in sizes])
    assert step.per_sample == gib and step.at(2048) > 2000 * gib


def test_probe_sizes_follow_the_running_batch() -> None:
    assert memory_probe.probe_sizes(64) == [1, 4, 16]
    assert memory_probe.probe_sizes(8) == [1, 4, 8]
    assert memory_probe.probe_sizes(1) == [1]
    one = limits.StepMemory.fit([1], [5 * MIB], [3 * MIB])  # one probe: all of its peak per sample
    assert (one.fixed, one.per_sample, one.how()) == (0.0, 5 * MIB, "5 MiB a sample, measured at batch 1")
