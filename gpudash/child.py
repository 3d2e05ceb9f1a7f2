"""The workload child process: its plumbing around ``gpudash.engine.StepLoop``.

``child_main`` is the entry point of the spawned child (see ``gpudash.runner``): it keeps
the terminal to the parent, builds the workload, runs the step loop and reports over two
queues. Torch is imported only inside functions here, so ``import gpudash.child`` stays cheap.
"""

from __future__ import annotations

import os
import signal
import sys
import time
import traceback
from collections import deque
from typing import TYPE_CHECKING, Any

from gpudash import faults, memguard
from gpudash.engine import Builder, StepLoop, one_line, plain, progress_reports
from gpudash.protocol import SAMPLES_DROPPED, Control, Event, EventKind, Message, RunConfig, Sample, Stop

if TYPE_CHECKING:  # pragma: no cover
    from workloads.base import Workload

MAX_EVENT_BACKLOG = 1000  # events held while the parent does not read; the oldest go beyond this
FLUSH_AT_EXIT_S = 10.0  # how long an exiting child waits for the parent to take its last events


def resolve_device(torch: Any, name: str) -> Any:
    """``auto`` → cuda if available, else cpu; anything else as torch reads it."""
    if name == "auto":
        return torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else torch.device("cpu")
    device = torch.device(name)
    if device.type == "cuda" and torch.cuda.is_available() and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    return device


def _platform_start_method() -> None:
    """Give the workload the start method a plain training script gets.

    A spawned child inherits "spawn" as its default start method, so DataLoader workers
    would each re-import torch (seconds per worker, at every reconfigure). The platform
    default (the first of ``get_all_start_methods()``: fork on Linux before 3.14) is what the
    workloads' loaders are written for.
    """
    import multiprocessing

    methods = multiprocessing.get_all_start_methods()
    if methods and multiprocessing.get_start_method(allow_none=True) != methods[0]:
        multiprocessing.set_start_method(methods[0], force=True)


def _isolate(log_path: str | None) -> None:
    """Keep the terminal to the parent: no Ctrl-C from the terminal, output to the log file."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop
    try:
        os.setpgid(0, 0)  # the terminal's Ctrl-C goes to the foreground group, not to us
    except OSError:
        pass
    target = log_path or os.devnull
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            try:
                stream.reconfigure(line_buffering=True)  # type: ignore[union-attr]
            except (AttributeError, ValueError):
                pass


class _Channel:
    """The child's ends of the two queues.

    Training never waits for the parent: while the output queue is full, samples are dropped
    (and counted: an "error" event with what="samples" says how many once the parent reads
    again) and events wait in order in a bounded backlog, sent before anything newer. The latest
    dropped sample follows that report: steps are cumulative, so the totals stay right even when
    the run ends before the parent reads again.
    """

    def __init__(self, controls: Any, out: Any, t0: float | None = None) -> None:
        import threading

        self._controls = controls
        self._out = out
        self._t0 = time.monotonic() if t0 is None else t0
        self._parent_check = 0.0
        self.parent_gone = False
        self._lock = threading.Lock()  # progress reports emit from a helper thread
        self._backlog: deque[Message] = deque()  # events not yet sent, oldest first
        self.dropped_samples = 0  # since the last report
        self.dropped_events = 0  # backlog overflow, since the last report
        self._dropping_since: float | None = None
        self._latest_dropped: Sample | None = None  # sent after the drop report: the totals

    def emit(self, msg: Message) -> None:
        """Send a message now if the queue has room; else drop it (a sample) or keep it (an event)."""
        with self._lock:
            if not self._send_backlog():
                self._hold(msg)
            elif not self._put(msg):
                self._hold(msg)

    def _hold(self, msg: Message) -> None:
        """Keep an event for later; count a dropped sample."""
        if self._dropping_since is None:
            self._dropping_since = time.monotonic()
        if isinstance(msg, Sample):
            self.dropped_samples += 1
            self._latest_dropped = msg
            return
        if len(self._backlog) >= MAX_EVENT_BACKLOG:
            self._backlog.popleft()
            self.dropped_events += 1
        self._backlog.append(msg)

    def _put(self, msg: Message) -> bool:
        import queue

        try:
            self._out.put_nowait(msg)
        except queue.Full:
            return False
        return True

    def _send_backlog(self) -> bool:
        """Send the held events, then the drop report; True when nothing is left waiting."""
        while self._backlog:
            if not self._put(self._backlog[0]):
                return False
            self._backlog.popleft()
        if self._dropping_since is None:
            return True
        report = self._drop_report()
        if report is not None and not self._put(report):
            return False
        self.dropped_samples = self.dropped_events = 0
        self._dropping_since = None
        latest, self._latest_dropped = self._latest_dropped, None
        if latest is None:
            return True
        self._backlog.append(latest)  # after the report, before anything newer
        return self._send_backlog()

    def _drop_report(self) -> Event | None:
        """What was dropped since the queue filled up, as one event (None: nothing was)."""
        samples = self.dropped_samples - (1 if self._latest_dropped is not None else 0)  # the latest goes on
        if not (samples or self.dropped_events):
            return None
        assert self._dropping_since is not None
        behind = time.monotonic() - self._dropping_since
        lost = f"{samples} sample{'s' if samples != 1 else ''} dropped"
        if self.dropped_events:
            lost += f" and {self.dropped_events} event{'s' if self.dropped_events != 1 else ''} lost"
        message = (f"{lost} over {behind:.1f} s: gpudash read the workload's messages too slowly "
                   "(steps and samples are cumulative, so the totals stay right)")
        details = {"dropped_samples": str(samples), "dropped_events": str(self.dropped_events),
                   "behind_s": f"{behind:.3f}"}
        return Event(time_s=time.monotonic() - self._t0, kind=EventKind.ERROR, what=SAMPLES_DROPPED, message=message,
                     details=details)

    def flush(self, timeout: float) -> None:
        """Wait up to ``timeout`` s (while the parent lives) for held events to be sent."""
        import multiprocessing

        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                if self._send_backlog():
                    return
            parent = multiprocessing.parent_process()
            if parent is not None and not parent.is_alive():
                self.parent_gone = True  # nobody will read: close without waiting for the pipe
                return
            if time.monotonic() >= deadline:
                return
            time.sleep(0.02)

    def next_control(self, timeout: float) -> Control | None:
        """The next control (waiting up to ``timeout`` s), or ``Stop`` once the parent is gone."""
        import multiprocessing
        import queue

        now = time.monotonic()
        if now >= self._parent_check:
            self._parent_check = now + 1.0
            parent = multiprocessing.parent_process()
            if parent is not None and not parent.is_alive():
                self.parent_gone = True
                return Stop()
        try:
            if timeout <= 0:
                return self._controls.get_nowait()
            return self._controls.get(timeout=timeout)
        except queue.Empty:
            return None

    def close(self) -> None:
        """Send what is held, then close the output queue (without waiting for its pipe when
        the parent is gone)."""
        if not self.parent_gone:
            self.flush(FLUSH_AT_EXIT_S)
        if self.parent_gone:
            self._out.cancel_join_thread()
        self._out.close()


def _builder(config: RunConfig, device: Any, rank: Any = None) -> Builder:
    """Builds workloads on ``device`` (as data-parallel ``rank``, a ``RankInfo``, when given); the
    run's image size applies to its first family only."""
    from workloads.base import WorkloadOptions
    from workloads.knobs import Knobs
    from workloads.registry import build

    def builder(name: str, variant: str | None, batch_size: int | None, knobs: Knobs | None = None) -> "Workload":
        """A workload of family ``name`` (None: the family's default variant or batch, no knob)."""
        same = name == config.workload
        options = WorkloadOptions(
            variant=variant,
            batch_size=batch_size,
            image_size=config.image_size if same else None,
            workers=config.workers,
            seed=config.seed,
            knobs=knobs or Knobs(),
            distributed=rank,
        )
        return build(name, device, options)

    return builder


def _started_details(torch: Any, loop: StepLoop, device: Any) -> dict[str, str]:
    """The "started" event's details: the configuration, torch, CUDA, pid and GPU."""
    workload = loop.workload
    details = loop.config()
    details.update(
        torch=torch.__version__,
        cuda=str(torch.version.cuda or ""),
        pid=str(os.getpid()),
        image_size=str(workload.image_size),
        workers=str(workload.describe()["workers"]),
    )
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        details.update(device_name=props.name, gpu_uuid=str(getattr(props, "uuid", "")))
    return plain(details)


def _run_child(config: RunConfig, channel: _Channel, t0: float) -> None:
    import torch

    from workloads.knobs import parse_knobs

    device = resolve_device(torch, config.device)
    if device.type == "cuda" and torch.cuda.is_available():
        torch.cuda.set_device(device)
    builder = _builder(config, device)
    knobs = parse_knobs(config.knobs)
    with progress_reports(channel.emit, lambda: time.monotonic() - t0, "knobs", knobs.warmups):
        first = builder(config.workload, config.variant, config.batch_size, knobs)
    # The loop alone holds the workload: a name kept here would keep the first workload's model and
    # data (577 MiB of GPU memory for encdec on an H100) alive after a switch to another family.
    loop = StepLoop(
        first,
        emit=channel.emit,
        controls=channel.next_control,
        builder=builder,
        sample_interval_s=config.sample_interval_s,
        max_steps=config.max_steps,
        trace_dir=config.trace_dir,
        t0=t0,
        fault=faults.for_workload(faults.from_env()),
    )
    message = f"{first.info.name} {first.variant}, batch {first.batch_size} on {device}"
    del first
    details = _started_details(torch, loop, device)
    channel.emit(Event(time_s=loop.now(), kind=EventKind.STARTED, message=message, details=details))
    loop.run()
    loop.workload.close()
    channel.emit(Event(time_s=loop.now(), kind=EventKind.STOPPED, details=plain(loop.config())))


def _run_ranks(config: RunConfig, controls: Any, out: Any, log_path: str | None, t0: float) -> None:
    """A data-parallel run: this process is torchrun's agent for the ranks (``gpudash.ranks``)."""
    from gpudash.ranks import describe_failure, launch

    try:
        launch(config, controls, out, log_path, t0)
    except Exception as exc:  # noqa: BLE001 - torch's ChildFailedError and friends, as one line
        raise RuntimeError(describe_failure(exc)) from exc


def child_main(config: RunConfig, controls: Any, out: Any, log_path: str | None, t0: float) -> None:
    """The spawned child's entry point: exit 0 after a clean stop, 1 after a crash."""
    _isolate(log_path)
    _platform_start_method()
    channel = _Channel(controls, out, t0)

    def now() -> float:
        """Seconds since the session's ``t0``."""
        return time.monotonic() - t0

    channel.emit(Event(time_s=now(), kind=EventKind.STARTING, message=f"pid {os.getpid()}"))
    code = 0
    try:
        memguard.apply_memory_guard()  # before torch: a runaway allocation fails here, reported
        if config.nproc > 1 or config.nnodes > 1:
            _run_ranks(config, controls, out, log_path, t0)
        else:
            _run_child(config, channel, t0)
    except BaseException as exc:  # noqa: BLE001 - report anything, then exit non-zero
        traceback.print_exc()
        channel.emit(Event(time_s=now(), kind=EventKind.CRASHED, message=one_line(exc)))
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        channel.close()
    if code:
        sys.exit(code)
