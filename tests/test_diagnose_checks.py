"""What ``diagnose`` checks by running it (issue 74): the job's torchrun command for one rank, the
DataLoader settings an input remedy names, and what the checks do to the remedies — a
communication remedy never above the one-rank run's ceiling, a waiting one too unless rank 0 is
the rank waited for, an input remedy whose raced settings lost says so. Also what a profiler window
is weighed against, and the link between two GPUs read from NVML's answers (faked at the ``pynvml``
boundary with what an H200 pair answered: ``docs/bench/h200x2-issue74b``). The runs themselves:
``tests/test_job_diagnose.py`` and ``tests/test_torchrun_ranks.py``."""

from __future__ import annotations

import dataclasses
import json
import sys
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from gpudash.core.trace_note import TraceNote
from gpudash.diagnosis.checks import LOADER, ONE_RANK, Check, loader_settings
from gpudash.diagnosis.evidence import Evidence
from gpudash.diagnosis.judge import Findings, judge
from gpudash.diagnosis.remedies import remedies
from gpudash.diagnosis.rules import diagnose
from gpudash.diagnosis.verdict import Bound
from gpudash.engine.trace_evidence import with_trace
from gpudash.engine.trace_figures import figures
from gpudash.host.links import link_between
from gpudash.job.command import one_rank_command
from gpudash.job.traces import TraceRead
from gpudash.stats.comparison import Comparison, Verdict
from tests.helpers import script_verdict
from tests.test_comm_exposed import ddp_job_evidence, issue_63_trace

PY = sys.executable
RUN = [PY, "-m", "torch.distributed.run"]


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        (
            ["torchrun", "--nproc-per-node", "2", "train.py", "--lr", "1"],
            ["torchrun", "--standalone", "--nproc-per-node", "1", "train.py", "--lr", "1"],
        ),
        (  # the job's own spelling kept (an older torchrun knows only --nproc_per_node)
            [*RUN, "--nproc_per_node=4", "--max-restarts", "3", "train.py"],
            [*RUN, "--standalone", "--nproc_per_node", "1", "train.py"],
        ),
        (  # argparse's abbreviation
            ["torchrun", "--nproc", "2", "--nnodes=1", "t.py"],
            ["torchrun", "--standalone", "--nproc-per-node", "1", "t.py"],
        ),
        (
            [*RUN, "--standalone", "--nnodes", "1", "--nproc-per-node", "8", "-m", "pkg.train"],
            [*RUN, "--standalone", "--nproc-per-node", "1", "-m", "pkg.train"],
        ),
        (
            [
                "/opt/bin/torchrun",
                "--rdzv-endpoint",
                "localhost:29400",
                "--nproc-per-node=gpu",
                "t.py",
                "--nproc-per-node",
                "9",
            ],
            ["/opt/bin/torchrun", "--standalone", "--nproc-per-node", "1", "t.py", "--nproc-per-node", "9"],
        ),
    ],
)
def test_a_torchrun_command_is_run_on_one_rank_of_this_machine_with_the_scripts_arguments_untouched(
    command: list[str], expected: list[str]
) -> None:
    assert one_rank_command(command, world=2) == expected


@pytest.mark.parametrize(
    ("command", "world", "why"),
    [
        ([PY, "train.py"], 2, "not torchrun"),
        (["torchrun", "--nnodes", "2", "--nproc-per-node", "8", "train.py"], 16, "several nodes"),
        (["torchrun", "--nnodes=2:4", "train.py"], 8, "several nodes"),
        (["torchrun", "--nproc-per-node", "1", "train.py"], 1, "one rank already"),
        (["torchrun", "--no-python", "--nproc-per-node", "2", "./train"], 2, "script (a .py file or -m module)"),
    ],
)
def test_a_job_whose_one_rank_cannot_be_asked_from_outside_says_why(command: list[str], world: int, why: str) -> None:
    said = one_rank_command(command, world)
    assert isinstance(said, str) and why in said


def _check(
    kind: str, ratio: float, low: float, high: float, verdict: Verdict = Verdict.FASTER, what: str = "1 rank"
) -> Check:
    return Check(kind, what, Comparison(ratio, low, high, verdict), 30.4, 30.4 * ratio, world=2)


# the issue-63 window (tests/test_comm_exposed.py): 28 of a 34 ms step in exposed all-reduce,
# communication-bound, "up to 5.8×" from the window alone
COMM_BOUND = with_trace(ddp_job_evidence(settings={"ddp_bucket_cap_mb": "25"}), figures(issue_63_trace(), 2, 137.2))


def test_a_communication_remedy_is_never_above_what_the_job_on_one_rank_ran() -> None:
    """The issue's case: a window says most of the step is exposed all-reduce ("up to 5.8×"); one
    rank ran 1.08× [1.06–1.10] faster: the remedy is "up to 1.1×" at the most, and below 1.05× it goes."""
    bound = diagnose(COMM_BOUND).bound
    assert bound == Bound.COMM
    alone = [r for r in remedies(COMM_BOUND, bound, script=True) if r.limit.startswith("communication")]
    assert alone and alone[0].up_to > 1.7
    capped = remedies(COMM_BOUND, bound, script=True, checks=[_check(ONE_RANK, 1.08, 1.06, 1.10)])
    comm = [r for r in capped if r.limit.startswith("communication")]
    assert comm and comm[0].up_to == pytest.approx(1.10)
    none = remedies(COMM_BOUND, bound, script=True, checks=[_check(ONE_RANK, 1.01, 0.99, 1.03, Verdict.NO_CHANGE)])
    assert not [r for r in none if r.limit.startswith("communication")]
    # no interval, or one rank slower than the world (a global batch split by the ranks): no bound
    short = Check(ONE_RANK, "1 rank", Comparison(1.01, None, None, Verdict.TOO_SHORT), 30.4, 30.7, world=2)
    slower = _check(ONE_RANK, 0.55, 0.5, 0.6, Verdict.SLOWER)
    for check in (short, slower):
        kept = [r for r in remedies(COMM_BOUND, bound, script=True, checks=[check]) if r.limit.startswith("comm")]
        assert kept and kept[0].up_to == alone[0].up_to
    assert slower.line().endswith("one rank runs slower, so the job's ranks do not each run the same step: no bound")


@pytest.mark.parametrize(("last_rank", "capped"), [(1, True), (None, True), (0, False)])
def test_a_waiting_remedy_is_capped_by_one_rank_unless_rank_0_is_the_one_waited_for(
    last_rank: int | None, capped: bool
) -> None:
    """On one rank, rank 0 runs its own extra work: where the others wait for it, its run does not
    bound what evening the ranks out gives."""
    waited: dict[str, Any] = {
        "comm_wait_ms": 22.0,
        "comm_longest_ms": 22.5,
        "comm_last_rank": last_rank,
    }  # matched: 22 ms waiting
    e = dataclasses.replace(COMM_BOUND, comm_transfer_ms=0.5, comm_transfer_exposed_ms=0.5, **waited)
    found = remedies(e, diagnose(e).bound, script=True, checks=[_check(ONE_RANK, 1.2, 1.15, 1.25)])
    waiting = [r for r in found if r.limit == "waiting"]
    assert waiting and (waiting[0].up_to == pytest.approx(1.25)) == capped
    assert capped or waiting[0].up_to > 1.6


# a Dataset that waits on reads (8 of a 10 ms step), no workers, on a GPU (its syncs say so)
_READS: dict[str, Any] = {
    "input_ms": 8.0,
    "input_dataset_ms": 7.5,
    "input_collate_ms": 0.2,
    "cpus": 8,
    "syncs_per_step": 1.0,
}
INPUT_BOUND = Evidence(
    30, 10.0, job_settings={"num_workers": "0", "pin_memory": "False", "persistent_workers": "False"}, **_READS
)


def test_the_dataloader_settings_raced_are_those_the_input_remedy_names_and_the_job_lacks() -> None:
    advice = next(r.advice for r in remedies(INPUT_BOUND, Bound.INPUT, script=True) if r.limit == "input")
    assert loader_settings(advice, INPUT_BOUND, cpus=8) == [("num_workers", "2"), ("pin_memory", "True")]
    with_four = Evidence(**{**INPUT_BOUND.__dict__, "job_settings": {"num_workers": "4", "pin_memory": "True"}})
    advice = next(r.advice for r in remedies(with_four, Bound.INPUT, script=True) if r.limit == "input")
    assert loader_settings(advice, with_four, cpus=6) == [("num_workers", "6"), ("persistent_workers", "True")]
    assert loader_settings("make less of each batch: a larger batch", INPUT_BOUND, cpus=8) == []
    full = "cheaper samples, not more DataLoader workers (7 and the loop have its 8 CPUs), pin_memory=True"
    assert loader_settings(full, INPUT_BOUND, cpus=8) == [("pin_memory", "True")]  # never what it rules out
    # the CPUs as a diagnosis event's details give them back: a whole number of workers
    again = Evidence.from_dict(json.loads(json.dumps(with_four.as_dict())))
    assert again.cpus == 8
    assert loader_settings(advice, again, cpus=again.cpus) == [("num_workers", "8"), ("persistent_workers", "True")]


def test_an_input_remedy_whose_raced_settings_lost_says_no_dataloader_setting_helps() -> None:
    lost = [
        _check(LOADER, 0.99, 0.97, 1.01, Verdict.NO_CHANGE, "num_workers=2"),
        _check(LOADER, 1.0, 0.99, 1.01, Verdict.NO_CHANGE, "pin_memory=True"),
    ]
    found = remedies(INPUT_BOUND, Bound.INPUT, script=True, checks=lost)
    advice = next(r.advice for r in found if r.limit == "input")
    assert advice.startswith("no DataLoader setting helps (num_workers=2, pin_memory=True: none faster, raced)")
    assert "making or their hand-over: cheaper samples" in advice and "bytes" not in advice  # small batches
    # the verdict's own line no longer advises what the race refuted
    judged = judge(Findings(INPUT_BOUND, script=True))
    document, _ = judged.answer(lost)
    line = judged.checked_line(document)
    assert line.startswith(f"{judged.verdict.bound}: {judged.verdict.why} — no DataLoader setting helps"), line
    assert document["advice"] == advice and judged.checked_line(judged.answer()[0]) == judged.line()
    handed = replace(INPUT_BOUND, input_batch_bytes=77e6)  # large batches: their hand-over, fewer bytes
    said = next(r.advice for r in remedies(handed, Bound.INPUT, script=True, checks=lost) if r.limit == "input")
    assert "hand-over of 77 MB (shared memory, the pin-memory thread, the copy to the GPU)" in said
    on_cpu = replace(handed, gpu_ms_per_step=None, gpu_busy_pct=None, syncs_per_step=None)  # ... on the CPU's terms
    said = next(r.advice for r in remedies(on_cpu, Bound.INPUT, script=True, checks=lost) if r.limit == "input")
    assert "hand-over of 77 MB (shared memory, the collation)" in said and "GPU" not in said
    won = [*lost[:1], _check(LOADER, 2.0, 1.9, 2.1, Verdict.FASTER, "pin_memory=True")]
    advice = next(r.advice for r in remedies(INPUT_BOUND, Bound.INPUT, script=True, checks=won) if r.limit == "input")
    assert "more DataLoader workers" in advice


def test_a_verdict_read_back_from_its_event_says_the_same_words() -> None:
    """The diagnose command reads the verdict's evidence back from its event's details: whole numbers
    stay whole ("its 2 CPUs", not "2.0": the verdict's line and its checked advice then differed)."""
    full = Evidence(
        30, 4.2, input_ms=1.4, cpus=2, input_workers=2, job_settings={"num_workers": "2", "persistent_workers": "False"}
    )
    again = Evidence.from_dict(json.loads(json.dumps(full.as_dict())))
    assert script_verdict(again).advice == script_verdict(full).advice and "its 2 CPUs" in script_verdict(full).advice
    assert all(type(getattr(again, name)) is int for name in ("steps", "cpus", "input_workers"))


def test_a_checks_line_says_what_ran_its_rates_interval_and_verdict() -> None:
    line = _check(ONE_RANK, 1.2, 1.11, 1.29).line()
    assert line.startswith(
        "checked: the same job on 1 rank: 36.5 steps/s on 1 rank, 30.4 on 2 (1 rank 1.20× [1.11–1.29], faster)"
    )
    assert line.endswith("communication and waiting take at most 22% of each step")  # 1 - 1/1.29
    skipped = Check(ONE_RANK, "1 rank", skipped="the job starts its ranks itself (not torchrun)", world=2)
    assert skipped.line() == "checked: the same job on 1 rank: skipped — the job starts its ranks itself (not torchrun)"
    said = {"kind": ONE_RANK, "what": "1 rank", "unit": "steps", "skipped": skipped.skipped, "line": skipped.line()}
    assert skipped.as_dict() == said


@pytest.mark.parametrize(
    ("steps", "said"),
    [((31.0, 30.0, 33.0), "a traced step 1.03× an untraced one"), ((48.0, 47.0, 50.0), "a distorted window")],
)
def test_a_window_is_weighed_against_the_untraced_steps_and_a_distorted_one_said_to_be(
    steps: tuple[float, ...], said: str
) -> None:
    read = TraceRead("trace", "t.json", steps=3, step_ms=steps)
    assert read.weighed(0.030).startswith(said)
    assert TraceRead("trace", "t.json").weighed(0.030) == ""  # a window that did not time its steps


class _Value:
    def __init__(self, value: int, value_type: int = 1, ret: int = 0) -> None:
        self.nvmlReturn, self.valueType = ret, value_type
        self.value = SimpleNamespace(uiVal=value, ullVal=value)


def _nvml(nvlink: bool, links: int = 18, mbps: int = 26562, gens: tuple[int, int] = (5, 5)) -> Any:
    """A ``pynvml`` with an H200 pair's answers (docs/bench/h200x2-issue74b/call1: 18 links at 26,562
    MB/s each, P2P over NVLink OK, PCIe Gen5 x16), or a pair without NVLink."""

    def state(handle: int, link: int) -> int:
        if link >= links:
            raise RuntimeError("NVML_ERROR_INVALID_ARGUMENT")
        return 1

    return SimpleNamespace(
        NVML_P2P_CAPS_INDEX_NVLINK=2,
        NVML_VALUE_TYPE_UNSIGNED_LONG_LONG=3,
        NVML_NVLINK_MAX_LINKS=36,
        NVML_FI_DEV_NVLINK_GET_SPEED=164,
        nvmlDeviceGetP2PStatus=lambda a, b, index: 0 if nvlink and index == 2 else 4,
        nvmlDeviceGetNvLinkState=state,
        nvmlDeviceGetFieldValues=lambda handle, fields: [_Value(mbps)],
        nvmlDeviceGetCurrPcieLinkGeneration=lambda handle: gens[handle],
        nvmlDeviceGetCurrPcieLinkWidth=lambda handle: 16,
    )


def test_the_link_between_two_gpus_is_nvlinks_links_times_their_speed_else_the_slower_pcie() -> None:
    link = link_between(_nvml(nvlink=True), [0, 1])
    assert link is not None and link.kind == "NVLink" and link.gbps == pytest.approx(478.116)
    assert link.words() == "NVLink (18 links × 26.6 GB/s) 478 GB/s"
    pcie = link_between(_nvml(nvlink=False, gens=(5, 4)), [0, 1])
    assert (
        pcie is not None and pcie.kind == "PCIe" and pcie.made_of == "Gen4 x16" and pcie.gbps == pytest.approx(31.504)
    )
    assert link_between(_nvml(nvlink=True), [0]) is None


def test_a_bus_bandwidth_is_said_as_a_share_of_the_links_peak() -> None:
    link = {"comm_link": "NVLink (18 links × 26.6 GB/s) 478 GB/s", "comm_link_gbps": 478.1}
    e = Evidence(**{**COMM_BOUND.__dict__, "comm_busbw_gbps": 180.0, **link})
    assert "180 GB/s of bus bandwidth (38% of NVLink's 478 GB/s)" in diagnose(e).why


def test_a_diagnosis_judged_with_the_machines_link_keeps_it_through_a_recording_and_its_remedies() -> None:
    """The source judges a diagnosis with NVML's tick and the link its sampler read; the judgement
    holds the link's words, which a recording keeps whole and a replay reads back. (On the GPU this
    once raised: the link's words were read as a number.)"""
    from gpudash.core.gpu_messages import GpuInfo
    from gpudash.core.protocol import Event, EventKind, GpuSample
    from gpudash.diagnosis.telemetry import RecentTicks
    from gpudash.recording.csvformat import event_row, header
    from tests.helpers import replayed_event, verdict_of

    e = Evidence(**{**COMM_BOUND.__dict__, "comm_busbw_gbps": 232.0})
    event = Event(1.0, EventKind.MEASURED, "diagnosis", data=Findings(e))
    link = GpuInfo(available=True, link="NVLink (18 links × 26.6 GB/s) 478 GB/s", link_gbps=478.116)
    (_, judged) = RecentTicks().through([GpuSample(time_s=0.5, mem_bw_util_pct=20.0, throttle=""), event], link)
    assert isinstance(judged, Event) and "232 GB/s of bus bandwidth (49% of NVLink's 478 GB/s)" in judged.message
    again = verdict_of(replayed_event(dict(zip(header(), event_row(judged), strict=True))))
    assert (again.evidence.comm_link, again.evidence.comm_link_gbps) == (link.link, 478.116)
    assert again == verdict_of(judged) and any("communication" in r.limit for r in again.remedies)


def test_a_windows_bus_bandwidth_is_weighed_against_the_link_on_its_line_as_the_diagnosis_does() -> None:
    """The record's line of a profiler window ("… at 231 GB/s of bus bandwidth") gets the link's
    share, as a diagnosis does, where the parent's NVML said the link; as it came where not, once."""
    from gpudash.core.gpu_messages import GpuInfo
    from gpudash.core.protocol import Event, EventKind
    from gpudash.diagnosis.telemetry import RecentTicks

    line = "5 steps traced; collectives: the data moves 0.451 ms a step (0.124 exposed) at 231 GB/s of bus bandwidth"
    event = Event(
        1.0, EventKind.MEASURED, "trace", message=line, data=TraceNote("", 5, 206.0, None, {"comm_busbw_gbps": 231})
    )
    ticks = RecentTicks()
    assert ticks.linked(event) == event  # no link known
    ticks.machine = GpuInfo(available=True, link="NVLink (18 links × 26.6 GB/s) 478 GB/s", link_gbps=478.116)
    linked = ticks.linked(event)
    assert linked.message.endswith("at 231 GB/s of bus bandwidth (48% of NVLink's 478 GB/s)")
    assert isinstance(linked.data, TraceNote) and linked.data.link.startswith("NVLink")
    assert linked.data.figure("comm_link_gbps") == 478.116 and ticks.linked(linked) == linked  # once
    unsized = Event(
        1.0, EventKind.MEASURED, "trace", message="5 steps traced, 41.3 ms/step", data=TraceNote("", 5, 206.0)
    )
    assert ticks.linked(unsized) == unsized


def test_a_hostile_window_answer_is_read_without_raising(tmp_path: Path) -> None:
    """A job's answer is a hostile message: numbers too large for a float, NaN, negative step
    times and sizes of the wrong shape are dropped, never raised into the session's loop."""
    import time

    from gpudash.job.traces import MAX_STEPS, JobTraces

    traces = JobTraces()
    trace = tmp_path / "trace.json"
    trace.write_text('{"traceEvents": []}')
    message = {
        "path": str(trace),
        "steps": 10**400,
        "wall_ms": 10**400,
        "steps_ms": -5,
        "step_ms": [10**400, "nan", -1, 31.5, None, float("inf")],
        "comm_sizes": {"all-reduce": [4, 10**9], "x": [1.5, 2], 3: [1, 1], "y": "z"},
    }
    traces.received(message)
    deadline = time.monotonic() + 60  # the read's thread answers once; waited for, not timed
    while not (found := traces.done()) and time.monotonic() < deadline:
        time.sleep(0.01)
    (read,) = found
    assert read.error == "" and read.figures is not None
    assert (read.steps, read.step_ms, read.steps_ms, read.wall_ms) == (MAX_STEPS, (31.5,), 0.0, 0.0)
    assert read.comm_sizes == {"all-reduce": (4, 10**9)}


def test_a_distorted_window_that_recorded_every_cuda_call_says_so(tmp_path: Path) -> None:
    """A GPU-only window that recorded every CUDA call (a torch without per-kind selection whose CUPTI
    could not be told otherwise) slows its steps: its answer says so and why, and the distorted
    window's words say it (a window of the GPU's work alone, or a message without the flag, does not)."""
    import time

    from gpudash.job.traces import JobTraces

    traces = JobTraces()
    trace = tmp_path / "trace.json"
    trace.write_text('{"traceEvents": []}')
    for calls in (True, "yes", None):
        message = {"path": str(trace), "steps": 3, "step_ms": [48.0, 47.0, 50.0], "calls": calls}
        traces.received(message | {"calls_why": "no libcupti loaded in the job's process"})
    deadline = time.monotonic() + 60  # the reads' threads answer once each; waited for, not timed
    found: list[TraceRead] = []
    while len(found) < 3 and time.monotonic() < deadline:
        found += traces.done()
        time.sleep(0.01)
    assert sorted(read.calls for read in found) == [False, False, True]  # only a true flag, not any value
    for read in found:
        said = read.weighed(0.030)
        assert said.startswith("a distorted window: a traced step 1.60× an untraced one")
        assert ("every CUDA call as well: no libcupti loaded" in said) is read.calls


def test_a_windows_cost_counts_its_warm_up_step_as_a_step_the_job_takes_anyway() -> None:
    """The profiler starts a step before the window's own (CUPTI attaching): that step's untraced
    time is not the window's cost, and its words say the step was there."""
    read = TraceRead("trace", "w.json", steps=5, warmup_steps=1, wall_ms=300.0, export_ms=50.0)
    cost = read.cost_s(0.030)
    assert cost is not None and abs(cost - (0.35 - 6 * 0.030)) < 1e-9
    assert read.cost(0.030).startswith("the window cost the job 0.17 s: its 5 steps and 1 warming the profiler up")
    unwarmed = TraceRead("trace", "w.json", steps=5, wall_ms=300.0, export_ms=50.0)
    assert unwarmed.cost(0.030).startswith("the window cost the job 0.20 s: its 5 steps took 0.30 s against 0.15 s")
