"""A job's wall time by phase: ``startup`` (its launch to its first step, less the first step's time
inside ``optimizer.step()``), ``training`` (the steps' own seconds, and that), ``evaluation``,
``checkpoint`` and ``compile`` (spans the job's hooks time between steps:
``gpudash/boot/gpudash_boot/phases.py``), ``stalled`` (no step for long, in no phase above:
``gpudash.job.stalls``), ``suspended`` (the job stopped: Ctrl-Z, ``kill -STOP``, SIGTTOU:
``gpudash.job.suspended``; left out of goodput's wall time), ``profiling`` (gpudash's own profiler
windows starting, stopping and writing their traces between steps; left out of it too),
``teardown`` (from its last step, or the end of the last phase after it — an evaluation, a
checkpoint — to its exit) and ``other``: the stretches between steps in which the hooks saw no
training (over three median steps: an upload, a barrier, a sleep; told as spans too) and the rest,
what no hook saw, such as a first step's own time. **Goodput** is training's share of the wall time. Torch-free.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpudash.core.protocol import (
    CHECKPOINT,
    COMPILE,
    EVALUATION,
    NOT_THE_JOBS,
    OTHER,
    PHASES,
    PROFILING,
    STARTUP,
    TEARDOWN,
    TRAINING,
)

SPAN_KINDS = frozenset({EVALUATION, CHECKPOINT, COMPILE, PROFILING, OTHER})  # what the hooks time
HEAVY_SHARE = 0.25  # evaluation or checkpoints above this share of the wall time: the diagnosis says so
ADVICE = {
    EVALUATION: "evaluate less often, or on fewer batches",
    CHECKPOINT: "save less often, or asynchronously (torch.distributed.checkpoint.async_save)",
}


@dataclass
class JobPhases:
    """Seconds by phase, from the run's start (``t0``, monotonic) to ``ended_t`` or now."""

    t0: float
    seconds: dict[str, float] = field(default_factory=dict)  # closed spans of the phases the hooks time, stalls
    training_s: float = 0.0
    first_step_t: float | None = None
    last_step_t: float | None = None
    ended_t: float | None = None
    open: dict[str, float] = field(default_factory=dict)  # phases under way: kind -> since (monotonic)
    ended_in_phase: bool = False  # the job ended in a stall or a span: no teardown after it
    after_last_t: float | None = None  # the end of the latest phase that ended after the last step ...
    after_last: str = ""  # ... and its kind
    first_training_s: float = 0.0  # the first step's time inside optimizer.step(): training, not start-up
    first_compile_s: float = 0.0  # dynamo's compiles before the first step's end: the compile phase, not start-up

    def step(self, t: float, train_s: float | None) -> None:
        """A step of the lead rank ended at ``t`` after ``train_s`` seconds of training."""
        if self.first_step_t is None:
            self.first_step_t = t
        self.last_step_t = t if self.last_step_t is None else max(self.last_step_t, t)
        if self.after_last_t is not None and self.after_last_t <= t:
            self.after_last_t = None  # (at the exit the last steps' records may come after its spans)
        if train_s is not None:
            self.training_s += train_s

    def first_step_training(self, seconds: float) -> None:
        """The first step's time inside ``optimizer.step()`` (a closure's evaluations): training."""
        self.training_s += seconds - self.first_training_s
        self.first_training_s = seconds

    def begin(self, kind: str, since: float) -> None:
        self.open.setdefault(kind, since)

    def end(self, kind: str, seconds: float, until: float | None = None) -> None:
        """A phase closed after ``seconds`` (its own, as timed) at ``until``; 0: it was none after all."""
        self.open.pop(kind, None)
        if seconds > 0:
            self.seconds[kind] = self.seconds.get(kind, 0.0) + seconds
            if until is not None and until > max(self.last_step_t or self.t0, self.after_last_t or self.t0):
                self.after_last_t, self.after_last = until, kind

    def totals(self, now: float) -> dict[str, float]:
        """Each phase's seconds (``PHASES``, in order), summing to the wall time; open phases up to now."""
        end = self.ended_t if self.ended_t is not None else now
        wall = max(0.0, end - self.t0)
        out = dict.fromkeys(PHASES, 0.0)
        first = self.first_step_t if self.first_step_t is not None else end
        out[STARTUP] = max(0.0, min(wall, first - self.t0) - self.first_training_s - self.first_compile_s)
        out[TRAINING] = self.training_s
        for kind, seconds in self.seconds.items():
            out[kind] = out.get(kind, 0.0) + seconds
        for kind, since in self.open.items():
            out[kind] = out.get(kind, 0.0) + max(0.0, end - since)
        if self.ended_t is not None and self.last_step_t is not None and not self.ended_in_phase:
            out[TEARDOWN] = max(0.0, self.ended_t - max(self.last_step_t, self.after_last_t or 0.0))
        out[OTHER] = max(0.0, wall - sum(v for k, v in out.items() if k != OTHER))
        return out

    def wall_s(self, now: float) -> float:
        return max(0.0, (self.ended_t if self.ended_t is not None else now) - self.t0)

    def goodput_pct(self, now: float) -> float | None:
        """Training's share of the wall time, less the time that was not the job's own (stopped,
        or gpudash's profiler windows: ``NOT_THE_JOBS``); None before any time has passed."""
        wall = self.wall_s(now)
        if self.open or any(self.seconds.get(kind) for kind in NOT_THE_JOBS):
            totals = self.totals(now)
            wall -= sum(totals[kind] for kind in NOT_THE_JOBS)
        return 100.0 * min(self.training_s, wall) / wall if wall > 0 else None

    def line(self, now: float) -> str:
        """ "goodput 62.1% of 58.3 s: training 36.2 s · evaluation 9.8 s · startup 6.0 s · …"."""
        return phases_line(self.totals(now), self.wall_s(now), self.goodput_pct(now))

    def heavy(self, now: float) -> str:
        """What the diagnosis adds when evaluation or checkpoints take over ``HEAVY_SHARE`` of the
        wall time ("evaluation takes 31% of the wall time — evaluate less often, …"); "" otherwise."""
        wall = self.wall_s(now)
        if wall <= 0:
            return ""
        totals = self.totals(now)
        said = [
            f"{kind} takes {100 * totals[kind] / wall:.0f}% of the wall time — {advice}"
            for kind, advice in ADVICE.items()
            if totals[kind] / wall > HEAVY_SHARE
        ]
        return "; ".join(said)


def phases_line(seconds: dict[str, float], wall_s: float, goodput_pct: float | None) -> str:
    """ "goodput 62.1% of 58.3 s: training 36.2 s · evaluation 9.8 s · …": the phases that took any
    time, in order (a live job's, and a recording's in ``gpudash report``)."""
    parts = [f"{k} {v:.1f} s" for k, v in seconds.items() if v >= 0.05 or k == TRAINING]
    head = "goodput –" if goodput_pct is None else f"goodput {goodput_pct:.1f}%"
    return f"{head} of {wall_s:.1f} s: " + " · ".join(parts)
