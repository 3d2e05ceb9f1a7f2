"""The diagnosis: each rule on synthetic evidence (the known bottleneck of each reference case, as
its figures read on an H100), and on the CPU end to end, the input-bound case and the CPU-bound one."""

from __future__ import annotations

import csv
import dataclasses
import json
from pathlib import Path

import pytest

from gpudash.core.protocol import Diagnose, Event, EventKind
from gpudash.diagnosis.evidence import Evidence
from gpudash.diagnosis.judge import Findings, judged
from gpudash.diagnosis.rules import INPUT_SHARE, MANY_SYNCS, diagnose
from gpudash.diagnosis.verdict import Bound
from gpudash.engine.loop import StepLoop
from tests.helpers import needs_two_cpus, replayed_event, verdict_of
from tests.test_record import gpudash
from workloads.base import WorkloadOptions
from workloads.factory import build

CASES = {
    # sync_loss sync-heavy: the host waits every step, the GPU idles between
    "sync-heavy": (Evidence(30, step_ms=4.0, input_ms=0.1, syncs_per_step=3, gpu_busy_pct=40.0), Bound.SYNC),
    # input_pipeline baseline: most of a step is the wait for the loader
    "loader": (Evidence(30, step_ms=50.0, input_ms=40.0, syncs_per_step=0, gpu_busy_pct=10.0), Bound.INPUT),
    # encdec pipelined at batch 8, plain: no syncs, the GPU idles between launches
    "launches": (
        Evidence(30, step_ms=4.9, input_ms=0.05, syncs_per_step=0, gpu_busy_pct=55.0, gpu_ms_per_step=2.7),
        Bound.HOST,
    ),
    # encdec at batch 32 with the best knobs: kernels back to back
    "compute": (Evidence(30, step_ms=9.0, input_ms=0.05, syncs_per_step=0, gpu_busy_pct=98.0), Bound.GPU_COMPUTE),
    "memory": (
        Evidence(30, step_ms=9.0, input_ms=0.05, syncs_per_step=0, gpu_busy_pct=98.0, mem_bw_pct=75.0),
        Bound.GPU_MEMORY,
    ),
    # a sync that does not starve the GPU does not bound the step (a logged loss)
    "sync, GPU busy": (Evidence(30, step_ms=9.0, input_ms=0.0, syncs_per_step=1, gpu_busy_pct=97.0), Bound.GPU_COMPUTE),
    # sync_loss sync-heavy at batch 32: six waits a step bound it, though the GPU stays busy
    "syncs, GPU busy": (Evidence(30, step_ms=38.0, input_ms=0.0, syncs_per_step=6, gpu_busy_pct=98.0), Bound.SYNC),
    "cpu": (Evidence(30, step_ms=20.0, input_ms=1.0), Bound.CPU),
}


@pytest.mark.parametrize("case", list(CASES))
def test_each_rule_names_the_known_bottleneck_with_its_evidence_and_advice(case: str) -> None:
    evidence, bound = CASES[case]
    verdict = diagnose(evidence)
    assert verdict.bound == bound
    line = verdict.line()
    assert line.startswith(str(bound)) and "\n" not in line and " — " in line
    advice = {
        Bound.SYNC: ".item()",
        Bound.INPUT: "loader workers",
        Bound.HOST: "cuda_graph",
        Bound.GPU_COMPUTE: "amp=bf16",
        Bound.GPU_MEMORY: "amp=bf16",
        Bound.CPU: "--device cuda",
    }[bound]
    assert advice in verdict.advice
    if bound == Bound.HOST:  # "the CPU needs 4.9 ms to enqueue a step whose kernels run 2.7 ms"
        assert "4.9 ms" in line and "2.7 ms" in line
    assert Evidence.from_dict(json.loads(json.dumps(evidence.as_dict()))) == evidence  # a recording's JSON read back
    assert json.loads(json.dumps(verdict.as_dict(evidence)))["bound"] == str(bound)


def test_the_rules_thresholds_decide_at_their_edges() -> None:
    just_input = Evidence(10, step_ms=10.0, input_ms=3.0, syncs_per_step=5, gpu_busy_pct=20.0)
    assert diagnose(just_input).bound == Bound.INPUT  # input first: the syncs are waiting on it
    below = Evidence(10, step_ms=10.0, input_ms=2.9, syncs_per_step=0, gpu_busy_pct=89.9)
    assert diagnose(below).bound == Bound.HOST
    assert diagnose(Evidence(10, step_ms=10.0, input_ms=2.9, syncs_per_step=0, gpu_busy_pct=90.0)).bound == (
        Bound.GPU_COMPUTE
    )
    busy = Evidence(10, step_ms=10.0, input_ms=0.0, syncs_per_step=MANY_SYNCS, gpu_busy_pct=99.0)
    assert diagnose(busy).bound == Bound.SYNC
    fewer = dataclasses.replace(busy, syncs_per_step=MANY_SYNCS - 0.5)
    assert diagnose(fewer).bound == Bound.GPU_COMPUTE


def _diagnosed(name: str, variant: str, **options: object) -> Event:
    w = build(name, "cpu", WorkloadOptions(variant=variant, **options))  # type: ignore[arg-type]
    got: list[object] = []
    pending = [Diagnose(12)]

    def controls(_timeout: float) -> Diagnose | None:
        return pending.pop() if pending and loop.steps_issued >= 3 else None

    loop = StepLoop(w, emit=got.append, controls=controls, sample_interval_s=0.1)
    loop.run(steps=20)
    w.close()
    errors = [m for m in got if isinstance(m, Event) and m.kind == EventKind.ERROR]
    assert not errors, errors[0].message
    (event,) = [m for m in got if isinstance(m, Event) and m.what == "diagnosis"]
    assert event.kind == EventKind.MEASURED and loop.steps_done == 20  # its 12 steps among them, trained apart
    return judged(event, None)  # as its source judges it (no NVML on the CPU)


SLOW_LOADER = """
import time
import torch
from torch import nn
from gpudash.api import Training


class Files(torch.utils.data.Dataset):
    def __len__(self):
        return 4096

    def __getitem__(self, i):
        time.sleep(0.005)  # reading a file: the loader waits, the CPU is free
        return torch.randn(16), i % 4


def workload(batch_size, device):
    model = nn.Linear(16, 4)
    loader = torch.utils.data.DataLoader(Files(), batch_size, drop_last=True)
    return Training(model, nn.CrossEntropyLoss(), torch.optim.SGD(model.parameters(), lr=0.1), loader=loader)
"""


def test_a_loader_slower_than_the_step_is_diagnosed_input_bound_on_the_cpu(tmp_path: Path) -> None:
    """Your own workload whose DataLoader reads slowly (5 ms a sample, no workers) and whose model is
    one linear layer: nearly all of a step is the wait for the batch."""
    (tmp_path / "slow.py").write_text(SLOW_LOADER)
    event = _diagnosed(f"{tmp_path / 'slow.py'}:workload", "serial", batch_size=8)
    assert verdict_of(event).head.bound == Bound.INPUT, event.message
    evidence = verdict_of(event).evidence
    assert evidence.input_share >= INPUT_SHARE and evidence.syncs_per_step is None  # not countable on the CPU
    assert "waits for the next batch" in event.message


def test_a_step_with_its_batches_ready_is_cpu_bound_on_the_cpu() -> None:
    event = _diagnosed("encdec", "serial")
    assert verdict_of(event).head.bound == Bound.CPU, event.message
    assert verdict_of(event).evidence.input_share < 0.3


@pytest.mark.slow
def test_gpudash_diagnose_prints_the_verdict_as_json_and_writes_nothing(tmp_path: Path) -> None:
    (tmp_path / "slow.py").write_text(SLOW_LOADER)
    r = gpudash(*"diagnose -w slow.py:workload --device cpu -b 8 --warmup 1 --json".split(), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["bound"] == "input-bound" and got["batch_size"] == 8 and got["device"] == "cpu"
    assert got["evidence"]["input_ms"] / got["evidence"]["step_ms"] >= INPUT_SHARE and "loader workers" in got["advice"]
    left = sorted(p.name for p in tmp_path.iterdir() if p.name != "__pycache__")  # Python's own, not gpudash's
    assert left == ["slow.py"]  # no CSV, no log left behind


@pytest.mark.slow
@needs_two_cpus
def test_a_data_parallel_run_is_diagnosed_by_rank_0_while_the_other_ranks_step_with_it(tmp_path: Path) -> None:
    """Issue 55: ``--nproc 2`` over gloo: rank 0 judges, rank 1 takes the same steps (their
    all-reduces pair), and the run ends as a one-rank diagnosis does."""
    (tmp_path / "slow.py").write_text(SLOW_LOADER)
    argv = "diagnose -w slow.py:workload --device cpu -b 8 --nproc 2 --warmup 1 --json"
    r = gpudash(*argv.split(), cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["bound"] == "input-bound" and got["evidence"]["input_ms"] / got["evidence"]["step_ms"] >= INPUT_SHARE


@pytest.mark.slow
def test_record_diagnose_adds_the_verdict_as_an_event_row_and_a_line(tmp_path: Path) -> None:
    (tmp_path / "slow.py").write_text(SLOW_LOADER)
    # 150 steps of at least 40 ms (8 reads of 5 ms): a window of 30 steps 1 s in fits, however slow the machine
    r = gpudash(*"record out.csv -w slow.py:workload --device cpu -b 8 --steps 150 --diagnose 1".split(), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "diagnosis: input-bound: " in r.stderr
    with open(tmp_path / "out.csv", newline="") as f:
        rows = [row for row in csv.DictReader(f) if row["event_what"] == "diagnosis"]
    assert len(rows) == 1 and rows[0]["event_kind"] == "measured" and rows[0]["event_message"].startswith("input-bound")
    kept = verdict_of(replayed_event(rows[0])).remedies  # what fixing it is worth, for a replay
    assert kept and kept[0].limit == "input" and kept[0].up_to > 1.05


@pytest.mark.parametrize(
    ("args", "said"),
    [
        ("diagnose --warmup 0", "--warmup"),
        ("diagnose -w nope --device cpu", "unknown workload 'nope'"),
        ("diagnose --json --record x.csv", "--record"),
        ("--diagnose 2", "--diagnose only applies with --record PATH"),
    ],
)
def test_bad_diagnosis_input_is_one_line_and_exit_2(tmp_path: Path, args: str, said: str) -> None:
    r = gpudash(*args.split(), cwd=tmp_path, timeout=120)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert said in r.stderr and len(r.stderr.strip().splitlines()) <= 2, r.stderr


def test_nvml_figures_from_the_parent_tell_memory_from_compute_and_name_throttling() -> None:
    """The workload process has no NVML: the parent judges a window's findings with the GPU's
    memory-bandwidth share and throttle reasons from before the window."""
    from gpudash.core.protocol import GpuSample

    evidence = Evidence(30, step_ms=9.0, input_ms=0.05, syncs_per_step=0, gpu_busy_pct=98.0)
    event = Event(time_s=1.0, kind=EventKind.MEASURED, what="diagnosis", data=Findings(evidence))
    assert verdict_of(judged(event, None)).verdict == diagnose(evidence)  # no tick: the window's own figures
    memory = judged(event, GpuSample(time_s=0.5, mem_bw_util_pct=80.0, throttle=""))
    assert memory.message.startswith("GPU-bound (memory): ") and verdict_of(memory).head.bound == Bound.GPU_MEMORY
    hot = judged(event, GpuSample(time_s=0.5, mem_bw_util_pct=20.0, throttle="sw_power_cap"))
    assert hot.message.startswith("GPU-bound (compute): ") and "throttled (sw_power_cap)" in hot.message


GPM_CASES = {
    # a loop of tiny kernels on an H100: NVML's utilisation 26%, SM activity 0.02% — busy by kernel
    # time in a step of many small launches, yet the SMs idle
    "small kernels": (dict(gpu_busy_pct=95.0, sm_active_pct=4.4, tensor_active_pct=0.0), Bound.SMALL_KERNELS),
    # a bf16 matmul loop: 100% kernel time, SMs 97%, tensor cores 94%, DRAM 24%
    "matmuls": (
        dict(gpu_busy_pct=99.0, sm_active_pct=96.6, tensor_active_pct=93.8, dram_active_pct=23.7),
        Bound.GPU_COMPUTE,
    ),
    # a 1 GiB copy loop: SMs 99%, tensor 0%, DRAM 90% (GPM's DRAM share wins over NVML's)
    "copies": (
        dict(gpu_busy_pct=99.0, sm_active_pct=99.0, tensor_active_pct=0.0, dram_active_pct=89.8, mem_bw_pct=10.0),
        Bound.GPU_MEMORY,
    ),
}


@pytest.mark.parametrize("case", list(GPM_CASES))
def test_gpm_tells_busy_sms_from_a_kernel_running(case: str) -> None:
    figures, bound = GPM_CASES[case]
    evidence = Evidence(30, step_ms=9.0, input_ms=0.05, syncs_per_step=0, **figures)  # type: ignore[arg-type]
    verdict = diagnose(evidence)
    assert verdict.bound == bound
    assert "(GPM)" in verdict.why and "no GPM" not in verdict.why
    assert Evidence.from_dict(json.loads(json.dumps(evidence.as_dict()))) == evidence
    if bound == Bound.SMALL_KERNELS:
        assert "kernels too small to fill the GPU" in verdict.why and "bigger batch" in verdict.advice


def test_without_gpm_the_verdict_says_it_was_judged_by_kernel_time_alone() -> None:
    verdict = diagnose(Evidence(30, step_ms=9.0, input_ms=0.05, syncs_per_step=0, gpu_busy_pct=98.0))
    assert verdict.bound == Bound.GPU_COMPUTE and "no GPM figures here: judged by kernel time" in verdict.why


def test_a_bf16_step_whose_tensor_cores_idle_says_so_and_an_fp32_one_does_not() -> None:
    idle = Evidence(30, 9.0, 0.05, 0, gpu_busy_pct=98.0, sm_active_pct=80.0, tensor_active_pct=2.0, dtype="bf16")
    verdict = diagnose(idle)
    assert verdict.bound == Bound.GPU_COMPUTE and "tensor cores idle (2%) in a bf16 step" in verdict.why
    assert "multiples of 8" in verdict.advice
    fp32 = diagnose(dataclasses.replace(idle, dtype="fp32"))
    assert "idle" not in fp32.why and "tensor cores 2%" in fp32.why
    assert Evidence.from_dict(json.loads(json.dumps(idle.as_dict()))) == idle  # the dtype reads back


def test_the_sm_threshold_decides_at_its_edge() -> None:
    from gpudash.diagnosis.rules import SM_BUSY

    at = Evidence(30, 9.0, 0.05, 0, gpu_busy_pct=98.0, sm_active_pct=SM_BUSY)
    assert diagnose(at).bound == Bound.GPU_COMPUTE
    assert diagnose(dataclasses.replace(at, sm_active_pct=SM_BUSY - 0.1)).bound == Bound.SMALL_KERNELS


def test_the_parent_adds_gpm_figures_to_a_diagnosis_from_before_the_window() -> None:
    from gpudash.core.protocol import GpuSample

    evidence = Evidence(30, step_ms=9.0, input_ms=0.05, syncs_per_step=0, gpu_busy_pct=98.0)
    event = Event(1.0, EventKind.MEASURED, what="diagnosis", data=Findings(evidence))
    idle_sms = verdict_of(judged(event, GpuSample(time_s=0.5, sm_active_pct=3.0, tensor_active_pct=0.0)))
    assert idle_sms.head.bound == Bound.SMALL_KERNELS and idle_sms.evidence.sm_active_pct == 3.0
    dram = judged(event, GpuSample(time_s=0.5, sm_active_pct=90.0, dram_active_pct=85.0))
    assert dram.message.startswith("GPU-bound (memory): ") and "DRAM bandwidth 85% busy" in dram.message


def test_a_source_judges_a_diagnosis_by_the_ticks_from_before_its_window() -> None:
    """The window's own seconds end with the profiler stopped and its trace read: the GPU idles, and
    a tick from then would call a GPU-bound step "busy, SMs idle". The source takes the newest
    tick from before the window began (``Findings.window_start_s``), and judges once: the
    dashboard shows the judgement as it came."""
    from gpudash.core.protocol import GpuSample
    from gpudash.diagnosis.telemetry import RecentTicks
    from gpudash.tui.state import DashState

    evidence = Evidence(30, step_ms=9.0, input_ms=0.05, syncs_per_step=0, gpu_busy_pct=98.0)
    event = Event(14.0, EventKind.MEASURED, what="diagnosis", data=Findings(evidence, window_start_s=10.0))
    ticks = [GpuSample(time_s=0.5 * i, sm_active_pct=90.0 if i <= 20 else 0.5, dram_active_pct=20.0) for i in range(28)]
    source = RecentTicks()
    *_, taken = source.through([*ticks, event], None)  # 0.5 s ticks: busy SMs until the window, idle after
    assert isinstance(taken, Event) and verdict_of(taken).head.bound == Bound.GPU_COMPUTE
    assert verdict_of(taken).evidence.sm_active_pct == 90.0
    state = DashState()
    state.ingest(taken)
    assert state.last_diagnosis is taken  # the dashboard judges nothing again
    unknown = Event(14.0, EventKind.MEASURED, what="diagnosis", data=Findings(evidence))
    (late,) = source.through([unknown], None)  # when its window began is not known: the newest tick
    assert isinstance(late, Event) and verdict_of(late).head.bound == Bound.SMALL_KERNELS


def test_a_jobs_diagnosis_judged_with_gpm_keeps_the_words_of_a_script() -> None:
    """The judge's look with GPM and NVML at a user's job's window gives advice a script can
    follow, not gpudash's knob names, which a job does not have."""
    from gpudash.core.protocol import GpuSample
    from gpudash.diagnosis.advice import SCRIPT_ADVICE

    evidence = Evidence(30, step_ms=9.0, input_ms=0.05, syncs_per_step=0, gpu_busy_pct=98.0)
    for script, words in ((True, "a larger batch, CUDA graphs"), (False, "bigger batch, cuda_graph")):
        event = Event(1.0, EventKind.MEASURED, what="diagnosis", data=Findings(evidence, script=script))
        got = judged(event, GpuSample(time_s=0.5, sm_active_pct=3.0))
        assert verdict_of(got).head.bound == Bound.SMALL_KERNELS and words in got.message
    assert set(SCRIPT_ADVICE) >= set(Bound)  # every verdict has a script's words
