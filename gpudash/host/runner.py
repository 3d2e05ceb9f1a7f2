"""The parent's side of the workload process: spawn it, send controls, receive messages.

Torch-free. The child (``gpudash.engine.child.child_main``) is started with the *spawn* method
(CUDA cannot live in a forked child). Controls go in over an unbounded queue (they are
few); samples and events come out over a bounded one: the child drops samples when it is
full, so a slow reader never stalls training.

No orphans: the child leads its own process group, and the group goes with it on every exit
path (``gpudash.core.procgroup``): its end seen by ``poll()`` (a crash, a SIGKILL), ``stop()``,
and gpudash's own exit (``gpudash.host.live_runners``: atexit; on SIGTERM and SIGHUP, where
nothing else handles them, before gpudash dies of the signal). When gpudash dies without any of
these (SIGKILL), the child's own watcher ends the group (``gpudash.engine.child``,
``gpudash.core.parent_watch``). Each child gets a scratch directory (``gpudash-PID-run-*`` in the
temp dir: the data-parallel launcher's logs and error files) that goes on the same paths. How the
child ended is told by ``ChildEnd`` (``gpudash.host.child_end``).
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import queue
import shutil
import signal
import tempfile
import time
from pathlib import Path

from gpudash.core import faults, procgroup
from gpudash.core.protocol import (
    NOT_RESPONDING,
    Control,
    Event,
    EventKind,
    Message,
    RankSample,
    RunConfig,
    Sample,
    Stop,
)
from gpudash.host import live_runners
from gpudash.host.child_end import UNRESPONSIVE_STOP_S, ChildEnd
from gpudash.host.watchdog import Watchdog, not_responding

OUT_QUEUE_SIZE = 100  # small enough that the pipe (64 KiB) never fills: the child exits cleanly
MAX_PER_POLL = 1000
FEEDER_JOIN_S = 1.0  # how long closing waits for a queue's feeder thread to flush its last control
STOP_S_PER_RANK = 2.5  # a data-parallel run gets this much longer to stop itself for each rank past the first


def stop_timeout(timeout: float, nproc: int) -> float:
    """How long a run of ``nproc`` local ranks gets to stop itself when asked for ``timeout`` s
    (0 stays 0: terminate at once). Each rank drains, leaves the collectives and exits in turn,
    and on a few busy CPUs eight of them take longer than one process."""
    if timeout <= 0:
        return 0.0
    return timeout + STOP_S_PER_RANK * max(0, nproc - 1)


def default_log_path() -> str:
    return os.path.join(tempfile.gettempdir(), f"gpudash-{os.getpid()}-child.log")


def with_slowest_rank(sample: Sample, ranks: dict[int, RankSample]) -> Sample:
    """Rank 0's sample with the slowest rank (largest step time p50) among it and the others' latest."""
    times = {0: sample.step_ms_p50, **{r: s.step_ms_p50 for r, s in ranks.items()}}
    known = {r: t for r, t in times.items() if t is not None}
    if not known:
        return sample
    rank = max(known, key=known.__getitem__)
    return dataclasses.replace(sample, slowest_rank=rank, slowest_rank_step_ms=known[rank])


class WorkloadRunner:
    """One workload child process at a time; ``restart()`` starts a fresh one."""

    def __init__(
        self, config: RunConfig, log_path: str | os.PathLike[str] | None = None, *, t0: float | None = None
    ) -> None:
        self.config = config  # updated to the configuration last seen running (for restart)
        self.log_path = str(log_path) if log_path else default_log_path()
        self.end = ChildEnd(self.log_path, own_log=not log_path)  # how the current child ended
        self.t0 = time.monotonic() if t0 is None else t0
        self._ctx = multiprocessing.get_context("spawn")
        self._process: multiprocessing.process.BaseProcess | None = None
        self._controls: multiprocessing.queues.Queue | None = None
        self._out: multiprocessing.queues.Queue | None = None
        self._backlog: list[Message] = []
        self._ranks: dict[int, RankSample] = {}  # a data-parallel run's latest report of each rank > 0
        self._scratch: str | None = None  # the child's scratch directory (removed with it)
        self._watchdog = Watchdog(config.watchdog_s)
        slow_parent = faults.of_kind("slow-parent")  # test-only: stop reading for a while
        self._reading_pause = faults.ParentPause(slow_parent) if slow_parent else None
        self._samples_seen = 0
        live_runners.stop_children_on(signal.SIGTERM, signal.SIGHUP)  # here: start() may run in a worker thread

    # -- life cycle ----------------------------------------------------------------------------
    def start(self) -> None:
        """Start the child (a no-op while one is running)."""
        if self._process is not None and self._process.is_alive():
            return
        from gpudash.engine.child import child_main  # torch-free at import

        Path(self.log_path).parent.mkdir(parents=True, exist_ok=True)
        self._controls = self._ctx.Queue()
        self._out = self._ctx.Queue(maxsize=OUT_QUEUE_SIZE)
        self.end.begin()
        self._ranks.clear()  # a new run's ranks report afresh
        self._watchdog.reset()
        self._remove_scratch()  # the last child's, when its end was never polled
        self._scratch = tempfile.mkdtemp(prefix=f"gpudash-{os.getpid()}-run-")
        self._process = self._ctx.Process(
            target=child_main,
            args=(self.config, self._controls, self._out, self.log_path, self.t0, self._scratch),
            name="gpudash-workload",
            daemon=False,  # the child may start DataLoader workers: daemons cannot
        )
        with procgroup.ctrl_c_held():  # from its birth: a Ctrl-C in its interpreter's start-up is the parent's
            self._process.start()
        live_runners.track(self)

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.is_alive()

    @property
    def finished(self) -> bool:
        """The child has exited and ``poll()`` has reported how."""
        return self._process is not None and self.end.reported

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    @property
    def exitcode(self) -> int | None:
        return None if self._process is None else self._process.exitcode

    def send(self, control: Control) -> None:
        """Queue a control; the child applies it at its next step boundary."""
        if self._controls is not None and self.alive:
            self._controls.put(control)
            self._watchdog.sent(control)

    @property
    def responding(self) -> bool:
        """False from a "not responding" report (the watchdog) until the child is heard again."""
        return not self._watchdog.unresponsive

    def poll(self) -> list[Message]:
        """Every message since the last poll, oldest first; never blocks.

        When the child has died without saying so, ends with one ``Event("crashed")``; when it
        has said nothing for ``config.watchdog_s``, one ``Event("error", what="watchdog")``.
        Once the child is gone, so is its process group when this returns.
        """
        out, self._backlog = self._backlog, []
        if self._reading_paused():
            return out  # GPUDASH_FAULT=slow-parent: the queue fills up meanwhile
        out.extend(self._drain())
        out.extend(self._watch())
        self.end.watch_memory(self.pid)
        if self._process is not None and not self.end.reported and self._process.exitcode is not None:
            out.extend(self._drain())  # what it sent before it died
            out.extend(self.end.end_events(self.exitcode, time.monotonic() - self.t0))
            if self._process.pid is not None:  # its workers go with it, now (milliseconds: they
                procgroup.end_group(self._process.pid)  # die on SIGTERM, the resource tracker at EOF)
            self._remove_scratch()
        return out

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the child: Stop control → join with timeout → terminate → kill. Idempotent.

        ``timeout`` grows with a data-parallel run's ranks (``stop_timeout``); 0 terminates at
        once. Terminate and kill go to the child's process group (its DataLoader workers, its
        ranks too); whatever of the group outlives the child is then ended too
        (``procgroup.end_group``), alive or not when this was called. Messages that arrive
        meanwhile (the last sample, "stopped") are kept for ``poll()``; once terminated, the
        child's end is reported as "stopped" (terminated after N s), whatever it says. A log file
        chosen here is removed when empty or when the child did not crash; the scratch directory
        always.
        """
        proc = self._process
        if proc is None:
            return
        if proc.exitcode is None:  # not when it already died: that is still a crash
            self.end.stop_asked()
        timeout = stop_timeout(timeout, self.config.nproc)
        if not self.responding:  # it will not read the Stop control: terminate it soon
            timeout = min(timeout, UNRESPONSIVE_STOP_S)
        if proc.is_alive() and self._controls is not None:
            try:
                self._controls.put(Stop())
            except (OSError, ValueError):
                pass
        self._join(proc, timeout)
        if proc.exitcode is None:
            self.end.terminating()
            self._signal_group(proc, signal.SIGTERM)
            self._join(proc, 3.0)
        if proc.exitcode is None:
            self._signal_group(proc, signal.SIGKILL)
            self._join(proc, 3.0)
        if proc.pid is not None:
            procgroup.end_group(proc.pid)
        self._remove_scratch()
        self._backlog.extend(self._drain())
        self._close_queues()
        live_runners.untrack(self)
        self.end.remove_log(proc.exitcode)

    def restart(self) -> None:
        """Stop the child (if running) and start a fresh one in the last configuration seen."""
        self.stop()
        self._backlog.extend(self.poll())
        self._process = None
        self.start()

    # -- internals -----------------------------------------------------------------------------
    @staticmethod
    def _signal_group(proc: multiprocessing.process.BaseProcess, sig: int) -> None:
        """``sig`` to the child's process group (it makes its own at start), else to the child."""
        pid = proc.pid
        try:
            if pid is None or os.getpgid(pid) != pid:
                raise ProcessLookupError  # not (yet) a group of its own: never our group
            os.killpg(pid, sig)
        except (ProcessLookupError, PermissionError):
            if sig == signal.SIGKILL:
                proc.kill()
            else:
                proc.terminate()

    def _remove_scratch(self) -> None:
        """Remove the child's scratch directory (its group is gone: nothing writes there)."""
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None

    def _join(self, proc: multiprocessing.process.BaseProcess, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while proc.exitcode is None and time.monotonic() < deadline:
            self._backlog.extend(self._drain())  # keep the pipe flowing while it exits
            proc.join(0.05)

    def _drain(self) -> list[Message]:
        got: list[Message] = []
        q = self._out
        if q is None:
            return got
        for _ in range(MAX_PER_POLL):
            try:
                msg = q.get_nowait()
            except (queue.Empty, OSError, ValueError, EOFError):
                break
            if isinstance(msg, RankSample):
                self._ranks[msg.rank] = msg  # folded into rank 0's next sample, and recorded as its row
                got.append(msg)
                continue
            got.append(noted := self._note(msg))
            if isinstance(noted, Sample) and noted.world_size > 1:  # rank 0's row beside the others'
                got.append(RankSample(noted.time_s, 0, noted.steps, noted.steps_per_s, noted.step_ms_p50))
        return got

    def _reading_paused(self) -> bool:
        """GPUDASH_FAULT=slow-parent (tests): leave the queue unread while the fault says so and
        the child lives."""
        if self._reading_pause is None or self._out is None or not self.alive:
            return False
        return self._reading_pause.paused(self._samples_seen, self._out.full())

    def _watch(self) -> list[Message]:
        """The watchdog's report when a started child has gone quiet for too long."""
        proc = self._process
        if proc is None or proc.exitcode is not None:
            return []
        silent = self._watchdog.check()
        if silent is None:
            return []
        now = time.monotonic() - self.t0
        return [
            Event(
                time_s=now,
                kind=EventKind.ERROR,
                what=NOT_RESPONDING,
                message=not_responding(silent, proc.pid),
                details={"silent_s": f"{silent:.1f}", "pid": str(proc.pid)},
            )
        ]

    def _note(self, msg: Message) -> Message:
        self._watchdog.heard(msg)
        if isinstance(msg, Sample):
            self._samples_seen += 1
        if isinstance(msg, Sample) and msg.world_size > 1:
            msg = with_slowest_rank(msg, self._ranks)
        if isinstance(msg, Sample):
            if (msg.workload, msg.variant, msg.batch_size, msg.knobs) != (
                self.config.workload,
                self.config.variant,
                self.config.batch_size,
                self.config.knobs,
            ):
                same = msg.workload == self.config.workload
                self.config = dataclasses.replace(
                    self.config,
                    workload=msg.workload,
                    variant=msg.variant,
                    batch_size=msg.batch_size,
                    knobs=msg.knobs,
                    image_size=self.config.image_size if same else None,
                )
        elif isinstance(msg, Event):
            msg = self.end.told(msg)
        return msg

    def _close_queues(self) -> None:
        """Close both queues and let their feeder threads end here, in this thread.

        A queue's semaphores are unlinked, and unregistered from multiprocessing's resource
        tracker, when their last reference goes. Left to a feeder thread still running at
        interpreter exit, that can stop between the two: the tracker then prints "leaked
        semaphore" warnings after gpudash's last line (1 exit in ~50 under load, measured)."""
        for q in (self._controls, self._out):
            if q is None:
                continue
            try:
                q.close()
            except (OSError, ValueError):
                continue
            feeder = getattr(q, "_thread", None)  # multiprocessing.Queue's feeder (None: nothing put)
            if feeder is not None:
                feeder.join(FEEDER_JOIN_S)
                if feeder.is_alive():  # the pipe is full and nobody reads it: do not wait at exit
                    q.cancel_join_thread()
        self._controls = self._out = None
