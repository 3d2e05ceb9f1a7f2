"""A diagnosis of the user's job, made passively over its own steps: a warm-up (until the step time
settles), an untraced window (wall time per step, the input wait, the syncs), then a profiler
window of as many steps inside the job (on the CPU too: the host's time outside torch is read from
it); the same rules as for every run (``gpudash.diagnosis.rules``). Its evidence is the training
steps' own: a step after one of the job's phases (an evaluation, a checkpoint, a compile, a pause:
its record's ``phase_s``) is left out of the untraced window, a profiler window such a phase fell
into is taken again where the phases are rare, and the verdict says over how many steps it stands.
Torch-free.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from gpudash.boot.gpudash_boot.sync_table import SyncTable
from gpudash.core.compile_table import CompileTable
from gpudash.core.protocol import DIAGNOSIS, Event, EventKind
from gpudash.core.running import Running
from gpudash.core.textfmt import plain
from gpudash.diagnosis.compile_bound import compile_bound, compile_figures, limit_note
from gpudash.diagnosis.evidence import Evidence
from gpudash.diagnosis.judge import Findings, WorldView
from gpudash.engine.comm_split import RankComm
from gpudash.engine.trace_evidence import with_trace
from gpudash.job.step_record import StepRecord
from gpudash.job.worker_busy import WorkerBusy
from gpudash.ranks.own_work import StragglerVerdict

SETTLE_STEPS = 10  # two runs of this many step times whose medians agree within SETTLE_TOLERANCE
SETTLE_TOLERANCE = 0.10
MAX_WARMUP_S = 60.0  # then the window starts anyway
MAX_RETAKES = 2  # profiler windows taken again where one of the job's phases fell into the last


@dataclass
class JobDiagnosis:
    """One diagnosis under way: feed it every rank's step records; ``phase`` says what it waits for
    ("warm-up", "timed", "traced": its profiler window, whose trace ends it). The warm-up reads the
    lead rank's steps; the window, the steps of ``rank`` — the rank the world waits for where one is
    named when the warm-up ends (``pick``), else the lead — whose evidence the verdict is."""

    steps: int
    asked_at: float  # monotonic
    rank: int = 0  # whose steps and profiler window the evidence is (the lead's until the warm-up ends)
    pick: Callable[[], int] | None = None  # the rank to read once warm: the straggler's, else the lead's
    phase: str = "warm-up"
    warm_ms: list[float] = field(default_factory=list)
    timed: list[StepRecord] = field(default_factory=list)
    timed_evidence: Evidence | None = None
    settled_after: int = 0  # warm-up steps seen
    workers: WorkerBusy | None = None  # the job's DataLoader workers, watched over the timed window
    left_out: int = 0  # timed steps left out: an evaluation, a checkpoint, a compile or a pause came before them
    spoiled: bool = False  # one of the job's phases fell into the profiler window: its figures are not the step's
    retakes: int = 0  # profiler windows taken again for that

    def add(self, record: StepRecord, now: float, rank: int | None = None) -> str | None:
        """One step of the job (``rank``'s, None: the rank read now); the phase it enters with it, if any."""
        if rank is not None and rank != self.rank:
            return None
        if self.phase == "warm-up":
            self.settled_after += 1
            if record.ms is not None and not record.profiled:
                self.warm_ms.append(record.ms)
            if self._settled() or now - self.asked_at >= MAX_WARMUP_S:
                self.phase = "timed"
                self.rank = self.pick() if self.pick is not None else self.rank
                if self.workers is not None:
                    self.workers.look(force=True)
                return self.phase
            return None
        if self.phase == "traced":
            self.spoiled = self.spoiled or (record.profiled and record.after_phase)
            return None
        if self.phase == "timed" and not record.profiled:
            if self.timed and record.after_phase:  # a phase's syncs, waits and time are not the step's
                self.left_out += 1
                return None
            self.timed.append(record)
            if self.workers is not None:
                self.workers.look()
            if len(self.timed) > self.steps:  # one more: the first one's boundary starts the window
                self.timed_evidence = untraced_evidence(self.timed)
                if self.workers is not None:
                    self.workers.look(force=True)
                    busy, count = self.workers.share()
                    if count:
                        self.timed_evidence = replace(self.timed_evidence, input_workers=count, input_workers_busy=busy)
                self.phase = "traced"  # on the CPU too: its time outside torch is the window's
                return self.phase
        return None

    def retake(self) -> bool:
        """The profiler window read had one of the job's phases in it: take it again (``True``), up
        to ``MAX_RETAKES`` times, where the phases are rarer than the timed window (at most one came
        in it); else its figures are taken as they are, and the verdict says so."""
        if not self.spoiled or self.retakes >= MAX_RETAKES or self.left_out > 1:
            return False
        self.spoiled = False
        self.retakes += 1
        return True

    def over(self) -> str:
        """ "over 30 training steps; 2 after an evaluation, a checkpoint or a compile left out"."""
        steps = self.timed_evidence.steps if self.timed_evidence else 0
        return steps_said(steps, self.left_out, self.retakes, self.spoiled)

    def _settled(self) -> bool:
        ms = self.warm_ms
        if len(ms) < 2 * SETTLE_STEPS:
            return False
        before = statistics.median(ms[-2 * SETTLE_STEPS : -SETTLE_STEPS])
        last = statistics.median(ms[-SETTLE_STEPS:])
        return before > 0 and abs(last - before) / before <= SETTLE_TOLERANCE


def steps_said(steps: int, left_out: int = 0, retakes: int = 0, spoiled: bool = False) -> str:
    """Over how many training steps a verdict stands, and what of the job's was left out of them
    (``spoiled``: a phase of the job's is in the profiler window read)."""
    said = f"over {steps} training steps"
    if left_out:
        said += f"; {left_out} after an evaluation, a checkpoint, a compile or a pause left out"
    taken = f"; the profiler window taken {retakes + 1} times" if retakes else ""
    if spoiled:
        said += (
            f"{taken}, the last with one of those in it" if taken else "; the profiler window has one of those in it"
        )
    elif retakes:
        said += f"{taken}, the job's phases out of it"
    return said


def own_steps(records: Sequence[StepRecord]) -> list[StepRecord]:
    """The records of training steps alone (none after one of the job's phases: an evaluation, a
    checkpoint, …), the first kept as the boundary that starts them."""
    return [r for i, r in enumerate(records) if i == 0 or not r.after_phase]


def untraced_evidence(records: list[StepRecord], sites: SyncTable | None = None) -> Evidence:
    """The untraced window's evidence: ``records`` are its steps and the one before (whose
    boundary starts the window). A step's time is its training seconds (evaluation, checkpoints and
    stalls between steps left out), or the wall time between boundaries where those are not known."""
    inside = records[1:]
    known = [r.train_s for r in inside if r.train_s is not None]
    wall_ms = 1e3 * (records[-1].t - records[0].t) / len(inside)
    if len(known) == len(inside):
        wall_ms = 1e3 * sum(known) / len(inside)
    syncs = [r.syncs for r in inside if r.syncs is not None]
    dataset, collate = (
        1e3 * sum(seconds) / len(inside) for seconds in zip(*((r.dataset_s, r.collate_s) for r in inside), strict=True)
    )
    made_here = dataset + collate > 0  # the job's own process made its batches (no workers)
    comm = [r.comm_ms for r in inside if r.comm_ms is not None]
    nbytes = sum(r.batch_bytes for r in inside)
    return Evidence(
        steps=len(inside),
        step_ms=wall_ms,
        input_ms=1e3 * sum(r.input_wait_s for r in inside) / len(inside),
        syncs_per_step=statistics.fmean(syncs) if syncs else None,
        sync_sites=sites,
        input_dataset_ms=dataset if made_here else None,
        input_collate_ms=collate if made_here else None,
        comm_longest_ms=statistics.fmean(comm) if comm else None,
        input_batch_bytes=nbytes / len(inside) if nbytes else None,
        cpus=len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),  # the job's too
    )


def ran_evidence(records: Sequence[StepRecord], steps: int, exit_code: int | None = 0) -> Evidence | str:
    """The evidence of the steps a job ran, for a diagnosis of a job that ended before its window
    closed: its timed steps after a warm-up of ``2 × SETTLE_STEPS``, when more than ``steps`` are
    left; else why not, with how it ended (a failure's exit code), the rate it ran at and the length
    a diagnosis needs."""
    timed = [r for r in records if not r.profiled and r.train_s is not None]
    usable = own_steps(timed[2 * SETTLE_STEPS :])
    if len(usable) > steps:
        return untraced_evidence(usable)
    need = 2 * SETTLE_STEPS + steps + 1
    seconds = sum(r.train_s or 0.0 for r in timed)
    if not records and exit_code:  # an argument it refused, an import that failed: no step to diagnose
        return f"the job failed (exit code {exit_code}) before its first step: its own output says why"
    ended = f"the job ended{f' (exit code {exit_code})' if exit_code else ''} after {len(records)} steps"
    if not timed or seconds <= 0:
        said = f"{ended}, none of them timed; a diagnosis needs about {need}"
        return f"{said}, and the job to run them without failing" if exit_code else said
    rate = len(timed) / seconds
    measured = sum(1 for r in records if r.profiled)  # steps of gpudash's own measuring: not the job's pace
    counted = f"{seconds:.2g} s of training"
    if measured:
        counted = f"{len(timed)} timed, {measured} measuring: {seconds:.2g} s"
    said = (
        f"{ended} ({counted} at {plain(rate)} steps/s); a diagnosis needs about {need} "
        f"(about {plain(need / rate, 2)} s at that rate)"
    )
    return f"{said}: give it more steps" if not exit_code else f"{said}, and the job to run them without failing"


@dataclass(frozen=True)
class VerdictContext:
    """What a job's session knows beside a window's evidence: the counted step's dtype, what the job
    already does (its loader's arguments, its flags), its sync table (CUDA), when the window began
    (the run's seconds), a phase heavy enough to name and its collectives matched across ranks."""

    dtype: str | None = None
    settings: dict[str, str] | None = None
    sites: SyncTable | None = None
    window_start: float | None = None
    heavy: str = ""
    comm: RankComm | None = None  # the lead rank's collectives matched across the ranks' windows
    straggler: str = ""  # a data-parallel job's straggler line, by the ranks' untraced own work ("" for one rank)
    straggler_rank: int | None = None  # ... the rank it names (None: none named)
    straggler_wait_ms: float | None = None  # ... and how long the lead rank waits for it a step (0: the lead is it)
    compiles: CompileTable | None = None  # a compiled job's compiles so far
    training_s: float = 0.0  # the run's training seconds so far (compiles left out) ...
    steps: int = 0  # ... over this many steps
    world: WorldView | None = None  # a job of several ranks: whose evidence, and the rank the world waits for
    over: str = ""  # over how many training steps the verdict stands, and what was left out of them


def world_view(ranks: int, rank: int, stragglers: StragglerVerdict | None) -> WorldView | None:
    """Whose evidence a verdict of a job of ``ranks`` ranks is (``rank``'s), and the rank the world
    waits for by the ranks' own work (``stragglers``), with its own work and the others'; None for one rank."""
    if ranks < 2:
        return None
    named = stragglers.rank if stragglers is not None else None
    works = {w.rank: w.own_ms for w in stragglers.ranks} if stragglers is not None else {}
    others = [ms for r, ms in works.items() if r != named]
    return WorldView(
        ranks=ranks,
        rank=rank,
        straggler=named,
        straggler_own_ms=works.get(named) if named is not None else None,
        others_own_ms=statistics.fmean(others) if named is not None and others else None,
    )


def verdict_event(
    time_s: float, timed: Evidence, fig: Any, known: VerdictContext, running: Running, note: str = ""
) -> Event:
    """The "measured" diagnosis event of an untraced window's evidence and a profiler window's
    figures (``fig`` None: none): its ``Findings``, which the session judges with NVML's tick from
    before the window (``gpudash.diagnosis.judge``); a job that keeps recompiling is compile-bound
    first (the window's verdict said after it), and a recompile limit hit is said beside any verdict."""
    untraced = replace(timed, sync_sites=known.sites, dtype=known.dtype, job_settings=known.settings)
    if known.straggler_rank is not None and known.straggler_wait_ms is not None:  # the untraced wait: the rules'
        untraced = replace(untraced, straggler_rank=known.straggler_rank, straggler_wait_ms=known.straggler_wait_ms)
    straggler = "" if known.world is not None and known.world.waits_for_it else known.straggler  # else the head's
    findings = Findings(
        with_trace(untraced, fig, known.comm),
        script=True,
        window_start_s=known.window_start,
        compile=compile_bound(known.compiles, known.training_s, known.steps),
        compile_figures=compile_figures(known.compiles, known.training_s, known.steps),
        note=note,
        beside=tuple(filter(None, (straggler, limit_note(known.compiles, time_s, known.steps)))),
        heavy=known.heavy,
        world=known.world,
        over=known.over,
        straggler=known.straggler,
        straggler_rank=known.straggler_rank if known.straggler else None,
    )
    said = "judged by the session"
    return Event(time_s, EventKind.MEASURED, what=DIAGNOSIS, message=said, data=findings, running=running)
