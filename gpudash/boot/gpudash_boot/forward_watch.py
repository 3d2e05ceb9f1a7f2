"""The span keeper's two looks at the job's forwards (``phases.py``): global module hooks, each on
only while it is needed, never once the job compiles (a global module hook in compiled code would
break its graph or recompile it). Standard library and the job's torch only.

- the **forward watch**: a forward pre-hook from a step's or a save's end to the next module call,
  which says whether that call is training's (the module in train mode, grad on) or other work's;
- the **evaluation watch**: a forward hook from an evaluation's possible start until training
  resumes, which keeps the end of its latest forward (eval mode, or no grad): after the last step,
  where no step follows, an evaluation lasts until then.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


class ForwardWatch:
    """``arm()`` the forward watch (``first(training)`` at the next module call of the training
    thread, ``ours()``), ``tail_on()`` the evaluation watch (``eval_end``); ``stop()`` them for good."""

    def __init__(self, first: Callable[[bool], None], ours: Callable[[], bool]) -> None:
        self.first = first
        self.ours = ours
        self.torch: Any = None  # the job's torch, once its signals are in (phase_signals)
        self.compiled = False  # the job called torch.compile: no forward watch (a hook in compiled code)
        self.watch: Any = None  # the forward watch's hook handle, while it is armed
        self.tail: Any = None  # the evaluation watch's hook handle (forwards' ends), while one may be under way
        self.eval_end: float | None = None  # the latest evaluation forward's end since the evaluation watch began

    def stop(self) -> None:
        """No watch again: the job compiles, or the hooks go off."""
        self.compiled = True
        self.disarm()
        self.tail_off()

    # -- the forward watch: a global forward pre-hook from a step's or a save's end to the next forward --
    def arm(self) -> None:
        if self.watch is not None or self.compiled or self.torch is None:
            return
        self.watch = add_hook(self.torch, "register_module_forward_pre_hook", self._forward)
        if self.watch is None:  # a torch without it: never armed again
            self.compiled = True

    def disarm(self) -> None:
        watch, self.watch = self.watch, None
        remove_hook(watch)

    def _forward(self, module: Any, _args: Any) -> None:
        """The first module call since the watch was armed: training's where the module is in train
        mode with grad on, other work's otherwise (an evaluation's, a teacher's); the watch off."""
        try:
            if self.ours():
                training = bool(getattr(module, "training", False)) and bool(self.torch.is_grad_enabled())
                self.disarm()
                self.first(training)
        except Exception:  # noqa: BLE001, S110 - never into the job's forward
            pass

    # -- the evaluation watch: a global forward hook from an evaluation's start to training's return --
    def tail_on(self) -> None:
        """An evaluation may begin now: its forwards' ends are watched until training resumes."""
        self.eval_end = None
        if self.tail is None and not self.compiled and self.torch is not None:
            self.tail = add_hook(self.torch, "register_module_forward_hook", self._tail_forward)

    def tail_off(self) -> None:
        tail, self.tail = self.tail, None
        remove_hook(tail)

    def _tail_forward(self, module: Any, _args: Any, _output: Any) -> None:
        """A module call's end while an evaluation may be under way: the evaluation's latest
        forward (eval mode, or no grad), or training's (train mode with grad: the watch off)."""
        try:
            if self.ours():
                if bool(getattr(module, "training", False)) and bool(self.torch.is_grad_enabled()):
                    self.tail_off()  # training's forward (a student after its teacher)
                else:
                    self.eval_end = time.monotonic()
        except Exception:  # noqa: BLE001, S110 - never into the job's forward
            pass


def add_hook(torch: Any, register: str, hook: Any) -> Any:
    """The handle of ``hook``, a global module hook that torch's ``register`` function (of
    ``torch.nn.modules.module``) adds; None where this torch has no such function or refuses it."""
    try:
        return getattr(torch.nn.modules.module, register)(hook)
    except Exception:  # noqa: BLE001 - a torch without it: no watch
        return None


def remove_hook(handle: Any) -> None:
    """Remove a global module hook's ``handle`` (None: none), quietly where another thread did first."""
    if handle is not None:
        try:
            handle.remove()
        except Exception:  # noqa: BLE001, S110 - removed already (another thread)
            pass
