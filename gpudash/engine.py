"""The workload child process: run a workload's steps, measure them, apply controls.

``child_main`` is the entry point of the spawned child (see ``gpudash.runner``). Torch is
imported only inside functions here, so ``import gpudash.engine`` stays cheap.

Measuring must not change what is measured:

- CUDA step timing: after each ``step()`` an event (``enable_timing=True``) is recorded on the
  current stream (the workload orders all of a step's work before it). Pending events wait in
  a deque and are read back with ``event.query()``; the step time is ``elapsed_time`` between
  consecutive completed events. ``query()`` and ``elapsed_time()`` on completed events never
  block the host, and neither goes through torch's sync check. Events come from a small pool.
- Loss: on CUDA, ``last_loss`` is copied into a pinned host buffer with ``non_blocking=True``
  (an async copy, no sync) and read once its event reports complete; at most one copy is in
  flight and at most two are issued per sample interval. On the CPU, ``float(loss)`` per sample.
- Syncs per step: ``torch.cuda.set_sync_debug_mode("warn")`` makes torch warn on every
  synchronizing operation; a ``warnings.showwarning`` hook counts those raised in the loop's
  thread (autograd replays backward-thread warnings there) and prints none of them. Only
  warnings raised inside ``step()`` are attributed to steps; the drain at a configuration
  change and the loop's own bookkeeping are counted apart (``bookkeeping_syncs``, which the
  GPU tests assert is zero).
"""

from __future__ import annotations

import gc
import math
import os
import re
import signal
import sys
import threading
import time
import traceback
import warnings
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gpudash.protocol import (
    EventKind,
    Control,
    Event,
    Message,
    Pause,
    Resume,
    RunConfig,
    Sample,
    SetBatchSize,
    SetVariant,
    Stop,
    SwitchWorkload,
)

if TYPE_CHECKING:  # pragma: no cover
    from workloads.base import Workload

Emit = Callable[[Message], None]
ControlSource = Callable[[float], "Control | None"]  # wait up to N seconds (0: don't wait)
Builder = Callable[[str, "str | None", "int | None"], "Workload"]

SYNC_WARNING = "called a synchronizing CUDA operation"
PROBATION_STEPS = 5  # an out-of-memory error this soon after a change reverts the change
CONTROL_CHECK_S = 0.005  # look for controls at most this often (each check is a syscall)


def one_line(exc: BaseException) -> str:
    """An exception as one line for the user."""
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    name = type(exc).__name__
    if name in ("WorkloadError",):
        return first or name
    return f"{name}: {first}" if first else name


def percentile(sorted_values: list[float], q: float) -> float:
    """Linear-interpolated percentile (0-100) of a sorted, non-empty list."""
    if len(sorted_values) == 1:
        return sorted_values[0]
    pos = (len(sorted_values) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def plain(details: dict[str, Any]) -> dict[str, str]:
    """Details as plain ``str`` (``torch.__version__`` is a str subclass: unpickling it in the
    parent would import torch there; ``str()`` of a str subclass is an exact ``str``)."""
    return {str(k): str(v) for k, v in details.items()}


# -- measuring ---------------------------------------------------------------------------------
class CpuStepTimer:
    """Wall-clock time around ``step()``: on the CPU a step is done when it returns."""

    def __init__(self) -> None:
        self._t = 0.0
        self._done: list[float | None] = []

    def begin(self) -> None:
        self._t = time.perf_counter()

    def end(self) -> None:
        self._done.append((time.perf_counter() - self._t) * 1000.0)

    def poll(self) -> list[float | None]:
        done, self._done = self._done, []
        return done

    def reset(self) -> list[float | None]:
        return self.poll()


class CudaStepTimer:
    """CUDA events after each step, read back by ``query()``: no host sync, ever."""

    def __init__(self, torch: Any) -> None:
        self._torch = torch
        self._pool: list[Any] = []
        self._pending: deque[Any] = deque()
        self._last: Any = None  # the latest completed event: the start of the next step's time

    def begin(self) -> None:
        pass

    def end(self) -> None:
        ev = self._pool.pop() if self._pool else self._torch.cuda.Event(enable_timing=True)
        ev.record()  # the current stream: the workload orders the whole step before it
        self._pending.append(ev)

    def poll(self) -> list[float | None]:
        """Step times (ms) of the steps that completed since the last poll; None = unknown."""
        done: list[float | None] = []
        pending = self._pending
        while pending and pending[0].query():
            ev = pending.popleft()
            if self._last is None:
                done.append(None)
            else:
                done.append(self._last.elapsed_time(ev))  # both complete: no wait
                self._pool.append(self._last)
            self._last = ev
        return done

    def reset(self) -> list[float | None]:
        """After a drain: collect what completed, and start timing afresh (no gap counted)."""
        done = self.poll()
        if self._last is not None:
            self._pool.append(self._last)
            self._last = None
        return done


class CpuLossReader:
    def __init__(self) -> None:
        self.value: float | None = None
        self._loss: Any = None

    def offer(self, loss: Any) -> None:
        self._loss = loss

    def poll(self) -> None:
        if self._loss is not None:
            self.value = float(self._loss)
            self._loss = None


class CudaLossReader:
    """The loss copied into pinned host memory without blocking; read when its event completes."""

    def __init__(self, torch: Any) -> None:
        self._torch = torch
        self._buf: Any = None
        self._event = torch.cuda.Event()
        self._in_flight = False
        self._wanted = True
        self.value: float | None = None

    def want(self) -> None:
        """Ask for a fresh value: the next offered loss is copied."""
        self._wanted = True

    def offer(self, loss: Any) -> None:
        if not self._wanted or self._in_flight or loss is None or loss.numel() != 1:
            return
        torch = self._torch
        if self._buf is None or self._buf.dtype != loss.dtype:
            self._buf = torch.empty((), dtype=loss.dtype, pin_memory=True)
        self._buf.copy_(loss.detach().reshape(()), non_blocking=True)
        self._event.record()
        self._in_flight = True
        self._wanted = False

    def poll(self) -> None:
        if self._in_flight and self._event.query():
            self.value = float(self._buf)  # host memory, the copy is complete
            self._in_flight = False


class SyncCounter:
    """Counts torch's "synchronizing CUDA operation" warnings raised in one thread."""

    def __init__(self) -> None:
        self.count = 0
        self._thread: int | None = None
        self._prev_show: Any = None
        self._prev_filters: Any = None
        self._prev_mode: Any = None
        self._torch: Any = None

    def install(self, torch: Any | None) -> None:
        """Turn on torch's sync warnings (if ``torch`` is given) and start counting them."""
        self._thread = threading.get_ident()
        self._prev_filters = list(warnings.filters)
        warnings.filterwarnings("always", message=".*" + re.escape(SYNC_WARNING))
        self._prev_show = warnings.showwarning
        warnings.showwarning = self._show
        if torch is not None:
            self._torch = torch
            self._prev_mode = torch.cuda.get_sync_debug_mode()
            torch.cuda.set_sync_debug_mode("warn")

    def uninstall(self) -> None:
        if self._torch is not None:
            self._torch.cuda.set_sync_debug_mode(self._prev_mode)
            self._torch = None
        if self._prev_show is not None:
            warnings.showwarning = self._prev_show
            warnings.filters[:] = self._prev_filters
            mutated = getattr(warnings, "_filters_mutated", None)
            if mutated is not None:
                mutated()
            self._prev_show = None

    def _show(self, message: Any, category: Any, filename: str, lineno: int, file: Any = None, line: Any = None) -> None:
        if SYNC_WARNING in str(message):
            if threading.get_ident() == self._thread:
                self.count += 1
            return
        self._prev_show(message, category, filename, lineno, file, line)


# -- the step loop -----------------------------------------------------------------------------
class StepLoop:
    """Runs a workload's steps, applies controls at step boundaries, emits samples and events.

    Used by the child process (``child_main``) and, in-process, by benchmarks and tests.
    ``controls(timeout)`` returns the next control or None (waiting up to ``timeout`` s).
    ``builder(workload, variant, batch_size)`` makes a new workload for ``SwitchWorkload``.
    """

    def __init__(
        self,
        workload: "Workload",
        *,
        emit: Emit,
        controls: ControlSource | None = None,
        builder: Builder | None = None,
        sample_interval_s: float = 0.25,
        count_syncs: bool | None = None,
        max_steps: int | None = None,
        t0: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        import torch

        self.torch = torch
        self.workload = workload
        self.emit = emit
        self.controls = controls
        self.builder = builder
        self.sample_interval_s = sample_interval_s
        self.max_steps = max_steps
        self.clock = clock
        self.t0 = clock() if t0 is None else t0
        self.on_cuda = workload.device.type == "cuda"
        if count_syncs is None:
            count_syncs = self.on_cuda
        self.syncs: SyncCounter | None = SyncCounter() if count_syncs else None
        self.timer: CpuStepTimer | CudaStepTimer = CudaStepTimer(torch) if self.on_cuda else CpuStepTimer()
        self.loss: CpuLossReader | CudaLossReader = CudaLossReader(torch) if self.on_cuda else CpuLossReader()
        # totals for the run
        self.steps_issued = 0
        self.steps_done = 0
        self.samples_done = 0
        self.bookkeeping_syncs = 0
        # the current window (since the last sample or configuration change)
        self._win_start = 0.0
        self._win_steps = 0
        self._win_samples = 0
        self._win_issued = 0
        self._win_syncs = 0
        self._win_ms: list[float] = []
        self._next_sample = 0.0
        self._next_loss = 0.0
        self._next_control = 0.0
        self._paused = False
        self._stopping = False
        self._probation = 0  # steps left in which an OOM reverts the last change
        self._previous: tuple[str, str, int] | None = None  # the configuration before it

    # -- public -----------------------------------------------------------------------------
    def now(self) -> float:
        return self.clock() - self.t0

    def config(self) -> dict[str, str]:
        w = self.workload
        return {
            "workload": w.info.name,
            "variant": w.variant,
            "batch_size": str(w.batch_size),
            "device": str(w.device),
        }

    def run(self, *, duration_s: float | None = None, steps: int | None = None) -> str:
        """Step until stopped (or for ``duration_s`` / ``steps`` more); returns why it ended."""
        if self.syncs is not None:
            self.syncs.install(self.torch if self.on_cuda else None)
        try:
            return self._run(duration_s, steps)
        finally:
            if self.syncs is not None:
                self.syncs.uninstall()

    # -- the loop ------------------------------------------------------------------------------
    def _run(self, duration_s: float | None, steps: int | None) -> str:
        clock = self.clock
        start = clock()
        end = None if duration_s is None else start + duration_s
        step_limit = None if steps is None else self.steps_issued + steps
        self._open_window(start)
        reason = "stopped"
        while True:
            now = clock()
            if self.controls is not None and now >= self._next_control:
                self._next_control = now + CONTROL_CHECK_S
                self._check_controls(0.0)
            if self._stopping:
                break
            if self.max_steps is not None and self.steps_issued >= self.max_steps:
                reason = "max_steps"
                break
            if step_limit is not None and self.steps_issued >= step_limit:
                reason = "steps"
                break
            if end is not None and now >= end:
                reason = "duration"
                break
            if self._paused:
                self._bookkeep(now)
                if self.controls is not None:
                    self._check_controls(min(0.05, self.sample_interval_s))
                else:
                    time.sleep(0.01)
                continue
            self._step()
            self._bookkeep(clock())
        self._finish()
        return reason

    def _step(self) -> None:
        syncs = self.syncs
        before = syncs.count if syncs is not None else 0
        timer = self.timer
        oom = False
        timer.begin()
        try:
            self.workload.step()
        except self.torch.cuda.OutOfMemoryError:
            if self._probation <= 0 or self._previous is None:
                raise
            oom = True
        if oom:
            self._revert_after_oom()
            return
        timer.end()
        self.loss.offer(self.workload.last_loss)
        self.steps_issued += 1
        self._win_issued += 1
        if self._probation > 0:
            self._probation -= 1
        if syncs is not None:
            self._win_syncs += syncs.count - before

    def _bookkeep(self, now: float) -> None:
        """Collect completed steps; issue loss reads; send a sample when one is due."""
        syncs = self.syncs
        before = syncs.count if syncs is not None else 0
        self._collect(self.timer.poll())
        if now >= self._next_loss:
            self._next_loss = now + self.sample_interval_s / 2
            if isinstance(self.loss, CudaLossReader):
                self.loss.want()
            self.loss.poll()
        if now >= self._next_sample:
            self._send_sample(now)
        if syncs is not None:
            self.bookkeeping_syncs += syncs.count - before

    def _collect(self, done: list[float | None]) -> None:
        if not done:
            return
        n = len(done)
        self._win_steps += n
        self.steps_done += n
        per = self.workload.samples_per_step
        self._win_samples += n * per
        self.samples_done += n * per
        self._win_ms.extend(d for d in done if d is not None)

    def _open_window(self, now: float) -> None:
        self._win_start = now
        self._win_steps = self._win_samples = self._win_issued = self._win_syncs = 0
        self._win_ms = []
        self._next_sample = now + self.sample_interval_s

    def _send_sample(self, now: float, *, force: bool = False) -> None:
        interval = now - self._win_start
        if interval <= 0 or (force and self._win_steps == 0 and self._win_issued == 0):
            return
        ms = sorted(self._win_ms)
        w = self.workload
        syncs = None
        if self.syncs is not None and self._win_issued:
            syncs = self._win_syncs / self._win_issued
        elif self.syncs is not None:
            syncs = None
        self.emit(
            Sample(
                time_s=now - self.t0,
                workload=w.info.name,
                variant=w.variant,
                batch_size=w.batch_size,
                steps=self.steps_done,
                samples=self.samples_done,
                interval_s=interval,
                steps_per_s=self._win_steps / interval,
                samples_per_s=self._win_samples / interval,
                step_ms_p50=percentile(ms, 50) if ms else None,
                step_ms_p95=percentile(ms, 95) if ms else None,
                syncs_per_step=syncs,
                loss=self.loss.value,
            )
        )
        self._open_window(now)

    def _settle(self) -> None:
        """Before a change: drain the device, count what completed, send the old window."""
        self.workload.drain()
        self._collect(self.timer.reset())
        self.loss.poll()
        self._send_sample(self.clock(), force=True)

    def _event(self, kind: EventKind, **kw: Any) -> None:
        if "details" in kw:
            kw["details"] = plain(kw["details"])
        self.emit(Event(time_s=self.now(), kind=kind, **kw))  # type: ignore[arg-type]


    # -- controls ------------------------------------------------------------------------------
    def _check_controls(self, timeout: float) -> None:
        assert self.controls is not None
        control = self.controls(timeout)
        while control is not None:
            self.apply(control)
            control = self.controls(0.0)

    def apply(self, control: Control) -> None:
        """Apply one control now (a step boundary)."""
        if isinstance(control, Stop):
            self._stopping = True
        elif isinstance(control, Pause):
            if not self._paused:
                self._settle()
                self._paused = True
                self._event(EventKind.PAUSED, details=self.config())
        elif isinstance(control, Resume):
            if self._paused:
                self._paused = False
                self._collect(self.timer.reset())
                self._open_window(self.clock())
                self._event(EventKind.RESUMED, details=self.config())
        elif isinstance(control, SetBatchSize):
            self._reconfigure("batch_size", batch_size=control.batch_size)
        elif isinstance(control, SetVariant):
            self._reconfigure("variant", variant=control.variant)
        elif isinstance(control, SwitchWorkload):
            self._switch(control)
        else:
            self._event(EventKind.ERROR, message=f"unknown control {control!r}")

    def _reconfigure(self, what: str, *, variant: str | None = None, batch_size: int | None = None) -> None:
        w = self.workload
        before = str(getattr(w, what))
        requested = str(variant if what == "variant" else batch_size)
        if requested == before:
            return
        previous = (w.info.name, w.variant, w.batch_size)
        try:  # a bad request is refused without draining the device or cutting the window
            w.check_change(variant=variant, batch_size=batch_size)
        except Exception as exc:  # WorkloadError
            self._event(EventKind.ERROR, what=what, before=before, after=requested, message=one_line(exc),
                        details=self.config())
            return
        self._settle()
        try:
            w.reconfigure(variant=variant, batch_size=batch_size)
        except Exception as exc:  # OOM while configuring, ...
            self._after_failure()
            self._event(EventKind.ERROR, what=what, before=before, after=requested, message=one_line(exc),
                        details=self.config())
            return
        self._changed(what, before, str(getattr(w, what)), previous)

    def _switch(self, control: SwitchWorkload) -> None:
        old = self.workload
        before = old.info.name
        previous = (old.info.name, old.variant, old.batch_size)
        if self.builder is None:
            self._event(EventKind.ERROR, what="workload", before=before, after=control.workload,
                        message="switching workloads is not possible here")
            return
        self._settle()
        old.close()
        try:
            new = self.builder(control.workload, control.variant, control.batch_size)
        except Exception as exc:
            message = one_line(exc)
            self._after_failure()
            self.workload = self.builder(*previous)  # the last good configuration
            self._reset_measuring()
            self._event(EventKind.ERROR, what="workload", before=before, after=control.workload,
                        message=message, details=self.config())
            return
        self.workload = new
        self._reset_measuring()
        self._changed("workload", before, new.info.name, previous)

    def _changed(self, what: str, before: str, after: str, previous: tuple[str, str, int]) -> None:
        self._previous = previous
        self._probation = PROBATION_STEPS
        self._open_window(self.clock())
        self._event(EventKind.CHANGED, what=what, before=before, after=after, details=self.config())

    def _reset_measuring(self) -> None:
        if self.on_cuda:
            self.loss = CudaLossReader(self.torch)
        else:
            self.loss = CpuLossReader()
        self.timer.reset()
        self._open_window(self.clock())

    def _after_failure(self) -> None:
        gc.collect()
        if self.on_cuda:
            self.torch.cuda.empty_cache()

    def _revert_after_oom(self) -> None:
        """Out of memory in the first steps after a change: back to the previous configuration."""
        assert self._previous is not None
        name, variant, batch = self._previous
        w = self.workload
        failed = f"{w.info.name} {w.variant} batch {w.batch_size}"
        what = "workload" if name != w.info.name else ("batch_size" if batch != w.batch_size else "variant")
        self._previous = None
        self._probation = 0
        self._after_failure()
        self.workload.drain()
        self._collect(self.timer.reset())
        if name != w.info.name:
            assert self.builder is not None
            w.close()
            self._after_failure()
            self.workload = self.builder(name, variant, batch)
            self._reset_measuring()
        else:
            w.reconfigure(variant=variant, batch_size=batch)
            self._open_window(self.clock())
        now = self.workload
        self._event(
            EventKind.ERROR,
            what=what,
            before=failed,
            after=f"{now.info.name} {now.variant} batch {now.batch_size}",
            message=f"CUDA out of memory with {failed}; back to batch {now.batch_size}, {now.variant}",
            details=self.config(),
        )

    def _finish(self) -> None:
        """Drain, count the last steps, send the last sample."""
        self.workload.drain()
        self._collect(self.timer.reset())
        self.loss.poll()
        self._send_sample(self.clock(), force=True)


# -- the child process -------------------------------------------------------------------------
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
    """The child's ends of the two queues."""

    def __init__(self, controls: Any, out: Any) -> None:
        self._controls = controls
        self._out = out
        self._parent_check = 0.0
        self.parent_gone = False

    def emit(self, msg: Message) -> None:
        import queue

        if isinstance(msg, Sample):
            try:
                self._out.put_nowait(msg)  # a slow reader drops samples; training never waits
            except queue.Full:
                pass
        else:
            try:
                self._out.put(msg, timeout=2.0)
            except queue.Full:
                print(f"gpudash engine: output queue full, event dropped: {msg}", file=sys.stderr)

    def next_control(self, timeout: float) -> Control | None:
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
        if self.parent_gone:
            self._out.cancel_join_thread()
        self._out.close()


def _run_child(config: RunConfig, channel: _Channel, t0: float) -> None:
    import torch

    from workloads.base import WorkloadOptions
    from workloads.registry import build

    device = resolve_device(torch, config.device)
    if device.type == "cuda" and torch.cuda.is_available():
        torch.cuda.set_device(device)

    def builder(name: str, variant: str | None, batch_size: int | None) -> "Workload":
        same = name == config.workload
        options = WorkloadOptions(
            variant=variant,
            batch_size=batch_size,
            image_size=config.image_size if same else None,
            workers=config.workers,
            seed=config.seed,
        )
        return build(name, device, options)

    workload = builder(config.workload, config.variant, config.batch_size)
    loop = StepLoop(
        workload,
        emit=channel.emit,
        controls=channel.next_control,
        builder=builder,
        sample_interval_s=config.sample_interval_s,
        max_steps=config.max_steps,
        t0=t0,
    )
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
    message = f"{workload.info.name} {workload.variant}, batch {workload.batch_size} on {device}"
    channel.emit(Event(time_s=loop.now(), kind=EventKind.STARTED, message=message, details=plain(details)))
    loop.run()
    loop.workload.close()
    channel.emit(Event(time_s=loop.now(), kind=EventKind.STOPPED, details=plain(loop.config())))


def child_main(config: RunConfig, controls: Any, out: Any, log_path: str | None, t0: float) -> None:
    """The spawned child's entry point: exit 0 after a clean stop, 1 after a crash."""
    _isolate(log_path)
    _platform_start_method()
    channel = _Channel(controls, out)

    def now() -> float:
        return time.monotonic() - t0

    channel.emit(Event(time_s=now(), kind=EventKind.STARTING, message=f"pid {os.getpid()}"))
    code = 0
    try:
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
