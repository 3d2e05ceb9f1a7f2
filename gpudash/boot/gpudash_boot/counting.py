"""Which of a job's doings are its steps, for gpudash's hooks (``hooks.py``). Standard library and
the job's own torch only.

- **Its optimizer's steps**, where it steps one (torch's global optimizer step hooks): as soon as an
  optimizer steps, its steps are the job's and nothing else counts. The hooks take each step at the
  end of ``optimizer.step()``, whatever ran inside it: an LBFGS step evaluates its closure (a forward
  and a ``backward()``) up to ``max_iter`` times, and is one step.
- Else **its training iterations**: a backward pass outside any optimizer step, followed by the
  parameters changing in place (``hand.py``: hand-written SGD).
- Else **its own ``gpudash.track()`` steps** (``Tracker.step()`` calls the hooks' ``tracked_step``),
  which take over from backward passes (the job's own word).

A job that changes from one to another (a few steps by hand, then an optimizer) goes on counting
from where it was, never counting an iteration twice: each step is taken by one of them, and the
one before stops for good. The hooks say each change (``wire.COUNTING``).

Backward passes inside an optimizer's ``step()`` are its closure's evaluations: counted here for
the one-off measurements (a FLOP count stops after the first, ``step_flops.py``), never a step.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

from . import wire
from .hand import HandUpdates, Leaves

HANDOVER_STEPS = 20  # another optimizer that steps this often alone becomes the one whose steps count


class StepCounting:
    """How the job's steps are counted (``by``: one of ``wire.BY_*``, "" before the
    first), and where each ends: ``take(source)`` (an optimizer, or the leaves a hand update wrote)
    at a hand-updated step's end; ``switched(counted, before)`` when the way changes."""

    def __init__(self, torch: Any, take: Callable[[Any], None], switched: Callable[[str, str], None]) -> None:
        self.by = ""
        self.take = take
        self.switched = switched
        self.hand = HandUpdates(torch, self._hand_stepped)
        self.stepping = False  # inside an optimizer's step(): its pre-hook ran, its post-hook not yet
        self.closure = False  # ... called with a closure
        self.evaluations = 0  # ... and the backward passes inside it so far (its closure's)
        self.track_samples = 0  # samples gpudash.track()'s steps named since the last step taken
        self.optimizer: Any = None  # a weak reference to the optimizer whose steps are the job's
        self.others = 0  # steps of other optimizers since the tracked one's last step

    # -- an optimizer's step -------------------------------------------------------------------------
    def optimizer_starts(self, args: Any, kwargs: Any) -> None:
        """An optimizer's ``step()`` begins (its arguments, the optimizer first: a closure, or none)."""
        closure = args[1] if len(args) > 1 else (kwargs or {}).get("closure")
        self.stepping, self.closure, self.evaluations = True, callable(closure), 0

    def optimizer_ends(self) -> int:
        """An optimizer's step has ended: its steps are the job's from now on. Its closure's
        evaluations (0: it had no closure)."""
        evaluations = self.evaluations if self.closure else 0
        self.stepping, self.closure, self.evaluations = False, False, 0
        self._switch(wire.BY_OPTIMIZER)
        return evaluations

    def tracks(self, optimizer: Any) -> bool:
        """Whether the step ``optimizer`` has just taken is the job's: the first optimizer's, not a
        second one's in the same iteration (a GAN's), until another steps ``HANDOVER_STEPS`` times
        alone (the first one is done) and takes over."""
        tracked = self.optimizer() if self.optimizer is not None else None
        if optimizer is not tracked:
            if tracked is not None and self.others < HANDOVER_STEPS:
                self.others += 1  # a second optimizer of the same iteration: not a step
                return False
            self.optimizer = weakref.ref(optimizer)  # the first, or the one that steps alone now
        self.others = 0
        return True

    # -- a backward pass -------------------------------------------------------------------------------
    def backward_starts(self, tensors: Any) -> None:
        if self.stepping:
            self.evaluations += 1
        elif self.hand.on:
            self.hand.backward_starts(tensors)

    def backward_ends(self) -> bool:
        """A pass has ended: True where it ends a closure's evaluation inside an optimizer's step
        (a one-off measurement there holds one evaluation's work, and stops)."""
        if self.stepping:
            return self.closure
        if self.hand.on:
            self.hand.backward_ends()
        return False

    def _hand_stepped(self, leaves: Leaves) -> None:
        if self.by in ("", wire.BY_BACKWARD):
            self._switch(wire.BY_BACKWARD)
            self.take(leaves)

    # -- gpudash.track() ---------------------------------------------------------------------------------
    def tracked(self, samples: int) -> bool:
        """A ``Tracker.step()``: True where it is the job's step (no optimizer steps)."""
        if self.by == wire.BY_OPTIMIZER:
            return False
        self._switch(wire.BY_TRACK)
        self.track_samples += max(0, samples)
        return True

    def leaves(self, device: str) -> Leaves:
        """What a tracked step stands on: the leaves the job's backward passes fill, where known."""
        leaves = self.hand.leaves
        return leaves if leaves is not None and leaves.param_groups[0]["params"] else Leaves([], device)

    def _switch(self, by: str) -> None:
        if by == self.by:
            return
        if by != wire.BY_BACKWARD:
            self.hand.off()
        before, self.by = self.by, by
        if before:
            self.switched(by, before)
