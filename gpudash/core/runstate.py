"""What runs now, followed through a run's events: the one place that decides it. Torch-free.

``RunState`` is what every reader of "what runs now" holds: the dashboard's state, the CSV
recorder, a sweep's measuring loop. Each feeds it the events it sees (``observe``); the
configuration comes typed from the event (``Event.running``, read once from its text form).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from gpudash.core.protocol import Event, EventKind, Sample
from gpudash.core.running import NO_KNOBS, Running


@dataclass
class RunState:
    """What runs now and which stretch of the run this is: updated only by ``observe``.

    ``segment`` counts the configurations the run has been through: it grows by one at each start
    and at each change that ran a different configuration, so two readers that saw the same
    events agree on it.
    """

    running: Running | None = None
    segment: int = 0

    def observe(self, e: Event) -> bool:
        """Follow one event; True when it began a new stretch of the run (a start, or a change
        that runs another configuration)."""
        if e.kind not in (EventKind.STARTED, EventKind.CHANGED):
            return False
        running = e.running or self._as_changed(e)
        if running is None:
            return False
        started = e.kind == EventKind.STARTED
        if self.running is not None and not running.device:
            running = replace(running, device=self.running.device)  # an old file's change names no device
        new = started or self.running is None or running.key != self.running.key
        self.running = running
        if new:
            self.segment += 1
        return new

    def observe_sample(self, s: Sample) -> bool:
        """Follow a sample (it names its configuration too); True when it runs another one than
        the events said (a sample ahead of its change's event)."""
        running = Running(s.workload, s.variant, s.batch_size, s.knobs, device=self.device, world_size=s.world_size)
        if self.running is not None and running.key == self.running.key:
            return False
        self.running = running
        self.segment += 1
        return True

    def assume(self, running: Running) -> None:
        """What runs, learnt before any event says (the run's settings, a replay's metadata)."""
        self.running = running

    def _as_changed(self, e: Event) -> Running | None:
        """A change whose event names no configuration (a file from an older gpudash): what ran
        with the one thing the change says."""
        if self.running is None:
            return None
        if e.what == "variant":
            return replace(self.running, variant=e.after)
        if e.what == "batch_size" and e.after.isdigit():
            return replace(self.running, batch_size=int(e.after))
        if e.what == "workload":
            return replace(self.running, workload=e.after)
        if e.what == "knobs":
            return replace(self.running, knobs=e.after or NO_KNOBS)
        return None

    @property
    def workload(self) -> str:
        return self.running.workload if self.running else ""

    @property
    def variant(self) -> str:
        return self.running.variant if self.running else ""

    @property
    def batch_size(self) -> int:
        return self.running.batch_size if self.running else 0

    @property
    def knobs(self) -> str:
        return self.running.knobs if self.running else NO_KNOBS

    @property
    def device(self) -> str:
        return self.running.device if self.running else ""
