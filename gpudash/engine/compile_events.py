"""gpudash's own families compile too (the ``compile`` knob): their recompiles at a batch change and
their graph breaks, read as a user's job reads them — the job's compile watch
(``gpudash.boot.gpudash_boot.compile_watch``) and the same intake
(``gpudash.core.compile_intake``) — and emitted as the run's events at the loop's sample times.
Nothing is installed until dynamo is loaded (a family without the knob never loads it). The
``cuda_graph`` knob's re-captures at a batch or variant change are said too (``RECAPTURE``)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from gpudash.boot.gpudash_boot.compile_watch import CompileWatch
from gpudash.core.compile_intake import CompileIntake
from gpudash.core.events import Event, EventKind

RECAPTURE = "recapture"  # a measured event: the cuda_graph knob captured the step again (a batch or variant change)


class LoopCompiles:
    """The step loop's compiles: ``poll(step, time_s)`` at a sample's time emits what dynamo did since."""

    def __init__(self, emit: Callable[[Event], None]) -> None:
        self.emit = emit
        self.intake = CompileIntake()
        self.watch: CompileWatch | None = None
        self._sent: list[dict[str, Any]] = []
        self.captures = 1  # the cuda_graph knob's captures of the step (the first, at its start)
        if "torch._dynamo.utils" in sys.modules:  # this process compiled before the loop: not the loop's
            self.watch = CompileWatch(self._received, lambda: 0)
            self.watch.skip_earlier()

    def _received(self, message: dict[str, Any]) -> None:
        self._sent.append(message)

    def poll(self, step: int, time_s: float) -> None:
        if self.watch is None:
            if "torch._dynamo.callback" not in sys.modules:
                return
            self.watch = CompileWatch(self._received, lambda: 0)
        self.watch.install()  # (again after a close: the loop runs again; what was sent is not sent again)
        self.watch.at_step(step)
        sent, self._sent = self._sent, []
        for message in sent:
            for event in self.intake.events(message, time_s):
                self.emit(event)

    def recaptured(self, change: str, seconds: float, time_s: float) -> None:
        """The ``cuda_graph`` knob captured the step again for ``change`` ("batch_size 16"), the change
        taking ``seconds`` in all (the rebuild and the capture)."""
        self.captures += 1
        message = f"cuda_graph captured the step again for {change} (capture {self.captures}; "
        message += f"the change took {seconds:.2f} s)"
        details = {"seconds": f"{seconds:.3f}"}
        self.emit(Event(time_s, EventKind.MEASURED, what=RECAPTURE, message=message, details=details))

    def close(self) -> None:
        if self.watch is not None:
            self.watch.uninstall()
