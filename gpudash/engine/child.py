"""The workload child process: its plumbing around ``gpudash.engine.loop.StepLoop``.

``child_main`` is the entry point of the spawned child (see ``gpudash.host.runner``): it keeps
the terminal to the parent, builds the workload, runs the step loop and reports over two
queues. Torch is imported only inside functions here, so ``import gpudash.engine.child`` stays cheap.

The child leads its own process group, which its DataLoader workers and a data-parallel run's
ranks (and theirs) inherit; the moment gpudash is gone, even SIGKILLed and whatever a step is
doing, a watcher thread removes the run's scratch directory and kills that whole group
(``gpudash.core.parent_watch.die_with_parent``; the ranks do the same when the launcher is gone).
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import time
import traceback
from typing import Any

from gpudash.core import faults, memguard, parent_watch
from gpudash.core.protocol import REFUSED, TRACEBACK, Event, EventKind, RunConfig
from gpudash.engine.builders import start_note, workload_builder
from gpudash.engine.channel import ParentChannel
from gpudash.engine.events import one_line, progress_reports
from gpudash.engine.loop import StepLoop


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
                stream.reconfigure(line_buffering=True)  # type: ignore[union-attr]  # TextIOWrapper's; else caught
            except (AttributeError, ValueError):
                pass


def _run_child(config: RunConfig, channel: ParentChannel, t0: float) -> None:
    import torch

    from workloads.knobs import parse_knobs

    device = resolve_device(torch, config.device)
    if device.type == "cuda" and torch.cuda.is_available():
        torch.cuda.set_device(device)
    builder = workload_builder(config, device)
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
        sync_sites=config.sync_sites,
        peak_tflops=config.peak_tflops,
    )
    message = f"{first.info.name} {first.variant}, batch {first.batch_size} on {device}"
    del first
    note = start_note(torch, loop, device)
    channel.emit(
        Event(loop.now(), EventKind.STARTED, message=message, details=note.details(), running=loop.running(), data=note)
    )
    loop.run()
    loop.workload.close()
    channel.emit(Event(time_s=loop.now(), kind=EventKind.STOPPED, running=loop.running()))


def _run_ranks(config: RunConfig, controls: Any, out: Any, log_path: str | None, t0: float, scratch: str) -> None:
    """A data-parallel run: this process is torchrun's agent for the ranks (``gpudash.engine.ranks``)."""
    from gpudash.engine.ranks import describe_failure, launch

    try:
        launch(config, controls, out, log_path, t0, scratch)
    except Exception as exc:  # noqa: BLE001 - torch's ChildFailedError and friends, as one line
        raise RuntimeError(describe_failure(exc)) from exc


def _is_refusal(exc: BaseException) -> bool:
    """A workload's refusal of its first configuration (``WorkloadError``: over a limit, a batch
    that would not fit in memory), as opposed to a failure while running."""
    from workloads.catalog_types import WorkloadError

    return isinstance(exc, WorkloadError)


def child_main(config: RunConfig, controls: Any, out: Any, log_path: str | None, t0: float, scratch: str) -> None:
    """The spawned child's entry point: exit 0 after a clean stop, 1 after a crash. ``scratch``
    is the run's scratch directory (the runner made it and removes it; so does the watcher)."""
    _isolate(log_path)
    parent_watch.die_with_parent(os.getpid(), scratch)  # after _isolate, which made the group (its id: this pid)
    _platform_start_method()
    channel = ParentChannel(controls, out, t0)

    def now() -> float:
        """Seconds since the session's ``t0``."""
        return time.monotonic() - t0

    channel.emit(Event(time_s=now(), kind=EventKind.STARTING, message=f"pid {os.getpid()}"))
    code = 0
    try:
        memguard.apply_memory_guard()  # before torch: a runaway allocation fails here, reported
        if config.nproc > 1 or config.nnodes > 1:
            memguard.share_among(config.nproc + 1)  # before the ranks start: they and this launcher, a share each
            _run_ranks(config, controls, out, log_path, t0, scratch)
        else:
            _run_child(config, channel, t0)
    except BaseException as exc:  # noqa: BLE001 - report anything, then exit non-zero
        traceback.print_exc()
        refused = {REFUSED: "true"} if _is_refusal(exc) else {}
        if getattr(exc, "traceback_in_log", False):  # the user's own code failed (workloads.user)
            refused[TRACEBACK] = "log"
        channel.emit(Event(time_s=now(), kind=EventKind.CRASHED, message=one_line(exc), details=refused))
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        channel.close()
    if code:
        sys.exit(code)
    # A clean stop: every report is in the pipe, the log flushed, the workload closed. What the
    # interpreter's shutdown would do now (stop torch's compile workers, tear down the CUDA
    # context) changes nothing the parent sees and took 4-6 s after a compiled ResNet-50 on an
    # H100; the runner ends the process group (those workers with it) in any case.
    os._exit(0)
