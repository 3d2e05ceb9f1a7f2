"""Issue 89: a verdict of a job of several ranks says whose evidence it is, and where one rank's own
work holds the others back, its head names that rank ("waiting for rank 0: its own work 57 ms a
step against 36 ms for the others"), then gives that rank's own verdict, its remedies capped at the
others' pace — and a diagnosis reads that rank's steps, not the lead's. Torch-free, no process."""

from __future__ import annotations

import json

import pytest

from gpudash.core.protocol import DIAGNOSIS, Event, EventKind
from gpudash.core.running import Running
from gpudash.core.textfmt import plain
from gpudash.diagnosis.evidence import Evidence
from gpudash.diagnosis.judge import Findings, WorldView, judge, judged
from gpudash.job.diagnosis_window import JobDiagnosis, VerdictContext, verdict_event, world_view
from gpudash.job.step_record import StepRecord
from gpudash.ranks.own_work import RankWork
from gpudash.ranks.own_work import judge as straggler_of
from tests.helpers import verdict_of

# rank 0's step on the CPU: 57 ms of it outside torch (a sleep before each batch), as issue 89's pair
SLOW_HOST = Evidence(30, step_ms=64.2, input_ms=0.5, host_gaps_ms=36.6, host_ms_per_step=60.0)
SLOW_INPUT = Evidence(30, step_ms=64.2, input_ms=30.0)  # a rank whose Dataset is slower: input-bound, 1.9× alone


def works(own: dict[int, float]) -> list[RankWork]:
    return [RankWork(rank, ms, 0.2, 1.0 if ms == max(own.values()) else 22.0, 40) for rank, ms in own.items()]


@pytest.mark.parametrize(("own", "slow"), [({0: 57.4, 1: 36.1}, 0), ({0: 36.0, 1: 58.0, 2: 36.2}, 1)])
def test_the_head_names_the_rank_the_world_waits_for_then_its_own_verdict(own: dict[int, float], slow: int) -> None:
    stragglers = straggler_of(works(own))
    assert stragglers is not None and stragglers.rank == slow
    world = world_view(len(own), slow, stragglers)
    assert world is not None and world.waits_for_it and world.pace_up_to is not None
    others = sum(ms for r, ms in own.items() if r != slow) / (len(own) - 1)
    assert world.pace_up_to == pytest.approx(own[slow] / others)
    got = judge(Findings(SLOW_INPUT, script=True, world=world))
    head = got.line()
    assert head.startswith(f"waiting for rank {slow}: its own work {plain(own[slow], 3)} ms a step against "), head
    assert f"rank {slow}'s own step: {got.verdict.bound}: " in head and "of 2 ranks" not in head
    assert got.remedies and all(r.up_to <= world.pace_up_to + 1e-9 for r in got.remedies)  # the others' pace
    alone = judge(Findings(SLOW_INPUT, script=True))  # the same step as a job of one rank
    assert max(r.up_to for r in alone.remedies) > world.pace_up_to  # capped, not merely small
    document, _ = got.answer()
    assert document["waiting_for"] == {
        "rank": slow,
        "own_ms": own[slow],
        "others_own_ms": pytest.approx(others),
        "up_to": pytest.approx(own[slow] / others),
    }
    assert document["evidence_rank"] == slow and document["ranks"] == len(own)
    listed = document["remedies"]
    assert isinstance(listed, list) and [r["up_to"] for r in listed] == [round(r.up_to, 3) for r in got.remedies]
    json.dumps(document)  # --json's, as printed


def test_an_even_job_names_no_rank_and_says_whose_evidence_it_is() -> None:
    stragglers = straggler_of(works({0: 36.0, 1: 36.1}))
    assert stragglers is not None and stragglers.rank is None
    world = world_view(2, 0, stragglers)
    got = judge(Findings(SLOW_HOST, script=True, world=world))
    assert world is not None and not world.waits_for_it and world.pace_up_to is None
    assert not got.line().startswith("waiting for rank") and "(rank 0's steps, of 2 ranks" in got.line()
    assert "waiting_for" not in got.answer()[0]
    assert world_view(1, 0, None) is None  # one rank: nothing to say of whose


def test_a_lead_waiting_for_another_rank_is_said_so_where_its_own_steps_are_the_evidence() -> None:
    """Where the diagnosis could not read the straggler's steps (the lead's were the evidence), the
    lead's wait is its verdict, and whose evidence it is is said."""
    stragglers = straggler_of(works({0: 36.0, 1: 58.0}))
    world = world_view(2, 0, stragglers)
    waiting = Evidence(30, step_ms=60.0, input_ms=0.2, straggler_rank=1, straggler_wait_ms=22.0)
    got = judge(Findings(waiting, script=True, world=world))
    assert world is not None and not world.waits_for_it
    assert got.head.line().startswith("waiting for another rank: ") and "rank 0's steps, of 2 ranks" in got.line()


def test_the_job_sessions_event_carries_the_world_through_a_recording() -> None:
    from gpudash.recording.csvformat import event_row, header
    from tests.helpers import replayed_event

    stragglers = straggler_of(works({0: 57.4, 1: 36.1}))
    known = VerdictContext(straggler=stragglers.words if stragglers else "", world=world_view(2, 0, stragglers))
    event = judged(verdict_event(30.0, SLOW_HOST, None, known, Running("job:train.py", "", 0)), None)
    assert event.message.startswith("waiting for rank 0: its own work 57.4 ms a step against 36.1 ms")
    assert "straggler: rank 0" not in event.message  # the head says it: not twice
    back = replayed_event(dict(zip(header(), event_row(event), strict=True)))
    assert verdict_of(back) == verdict_of(event) and back.message == event.message


def record(step: int, ms: float) -> StepRecord:
    return StepRecord(
        step, step * ms / 1e3, ms, samples=8, tokens=0, input_wait_s=0.0, syncs=None, profiled=False, train_s=ms / 1e3
    )


def test_a_diagnosis_reads_the_steps_of_the_rank_it_picks_once_warm() -> None:
    """The warm-up reads the lead's steps; once they settle, the window reads the rank the world
    waits for (``pick``) — its own steps, not the lead's, which wait for it."""
    d = JobDiagnosis(5, asked_at=0.0, rank=0, pick=lambda: 1)
    phases = []
    for step in range(1, 60):
        for rank, ms in ((0, 40.0), (1, 58.0)):
            if (phase := d.add(record(step, ms), now=1.0, rank=rank)) is not None:
                phases.append(phase)
    assert phases == ["timed", "traced"] and d.rank == 1
    assert d.timed_evidence is not None and d.timed_evidence.step_ms == pytest.approx(58.0)


def test_a_diagnosis_event_of_one_rank_says_nothing_of_ranks() -> None:
    event = judged(Event(1.0, EventKind.MEASURED, what=DIAGNOSIS, data=Findings(SLOW_HOST)), None)
    assert "ranks" not in event.message and "waiting for rank" not in event.message
    assert WorldView(2, 0).whose() == "rank 0's steps, of 2 ranks"
