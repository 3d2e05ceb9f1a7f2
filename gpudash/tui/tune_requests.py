"""The dashboard's tune (``u``) as the run sees it (``TuneRequests``): whether a tune can start now,
the race it asks for, and its winner applied to the run. ``gpudash.tune.job`` runs the race in a
child process; the app starts it and polls it (``gpudash.tui.steering``).

A part of ``gpudash.tui.controller.DashController`` (its ``tune``), apart because it is a job of its
own; it reads the controller's state through ``TunedRun``. Textual-free.
"""

from __future__ import annotations

from typing import Protocol

from gpudash.core import protocol
from gpudash.core.protocol import Control, EngineSource, RunConfig
from gpudash.tui.knob_steering import KnobSteering
from gpudash.tui.notices import Notice, warning
from gpudash.tui.run_requests import RunRequests
from gpudash.tui.state import DashState
from gpudash.tune.job import TuneAnswer, TuneRequest
from workloads.knobs import Knobs, label_of, parse_knobs  # torch-free


class TunedRun(Protocol):
    """What a tune reads of the run and sends through (``DashController``'s)."""

    state: DashState
    config: RunConfig
    replay: bool
    ready: bool  # source.start() has returned
    source: EngineSource
    requests: RunRequests
    knobs: KnobSteering

    def send(self, control: Control, note: str) -> Notice: ...

    def read_only(self, what: str) -> Notice: ...


class TuneRequests:
    """A tune of ``run``: refused, asked for, its winner applied."""

    def __init__(self, run: TunedRun) -> None:
        self.run = run

    def refusal(self) -> Notice | None:
        """Why a tune cannot start now, or None."""
        run = self.run
        if run.replay:
            return run.read_only("tune")
        if not run.ready:
            return warning("the workload is still starting; try again in a moment")
        if run.state.ended or not run.source.alive:
            return warning("the workload is not running — press r to restart")
        ranks = run.config.nproc * run.config.nnodes
        if ranks > 1:
            return warning(f"tune races one process; this run has {ranks} ranks — run gpudash tune -w … apart")
        if not run.state.run.batch_size or not run.state.run.workload:
            return warning("the workload and batch size are not known until the workload has started")
        return None

    def request(self, minutes: float) -> TuneRequest:
        """The race for exactly what runs now: its workload at its batch size, image size and workers,
        on this run's device, with its variant and knobs raced beside the rest (tune's ``--current``)."""
        run, running = self.run, self.run.state.run
        return TuneRequest(
            workload=running.workload,
            batch_size=running.batch_size,
            device=run.config.device,
            seed=run.config.seed,
            max_minutes=minutes,
            image_size=run.config.image_size_for(running.workload),
            workers=run.config.workers,
            current=label_of(running.variant, Knobs(parse_knobs(running.knobs).items())),
        )

    def apply(self, answer: TuneAnswer) -> list[Notice]:
        """Run the winner here: its variant, batch size and knobs (each a marked change), then resume.
        Knobs go off first when the variant changes, so no running knob refuses the new variant."""
        run = self.run
        notices: list[Notice] = []
        target = Knobs(answer.knobs)
        if answer.variant != run.state.run.variant and run.knobs.base():
            notices.append(run.send(protocol.SetKnobs(Knobs().text()), "knobs off before the variant changes…"))
        if answer.variant != run.state.run.variant:
            notices.append(run.send(protocol.SetVariant(answer.variant), f"switching to {answer.variant}…"))
        if answer.batch_size != run.state.run.batch_size:
            notices.append(run.requests.set_batch(answer.batch_size))
        if target != run.knobs.base():
            notices.append(run.send(protocol.SetKnobs(target.text()), f"knobs → {target.text()} requested…"))
        if run.state.paused:
            notices.append(run.send(protocol.Resume(), "resuming…"))
        return notices
