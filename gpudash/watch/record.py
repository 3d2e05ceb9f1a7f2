"""``gpudash watch --record PATH``: the box's NVML telemetry to CSV, headless, until Ctrl-C (or
``--duration``). Never imports Textual or torch.

The file is gpudash's CSV (``gpudash.recording.csvformat``), written by the recorder every
recording uses (``CsvRecorder``), with a ``gpu`` row per NVML tick (the charted GPU's columns and
every watched GPU's ``gpuN_*`` columns) instead of a workload's samples; ``gpudash replay`` shows
it. Every row is flushed as it is written and the last ticks are written before the file closes,
so Ctrl-C, SIGTERM or SIGHUP lose no row. Exit status: 0 done (``--duration`` reached), 130
interrupted, 1 NVML cannot be used here or lost the GPU, or writing failed (the rows before stay
whole); 2 the CSV cannot be created.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

from gpudash.core.protocol import Event, EventKind, ExitCode, GpuInfo, RunConfig
from gpudash.host.nvml import NvmlSampler
from gpudash.recording.line_writers import RecordWriteError
from gpudash.recording.metadata import run_metadata
from gpudash.recording.record import CsvRecorder

POLL_S = 0.1  # how often the loop writes what the sampler took


def watch_metadata(info: GpuInfo, interval_s: float, **extra: Any) -> dict[str, Any]:
    """A watch recording's metadata: the GPUs and the driver, no workload's configuration."""
    meta = run_metadata(RunConfig(gpu_interval_s=interval_s), info, recorded_by="gpudash watch", **extra)
    del meta["config"]  # no workload ran; a replay reads "no configuration", not encdec's defaults
    meta["gpu_interval_s"] = interval_s
    return meta


def focus_first_watched(sampler: NvmlSampler) -> None:
    """Chart the first GPU watched (``--gpus 2,3``: GPU 2), not GPU 0 when it is not watched."""
    info = sampler.info
    if info.available and info.sampled and info.index not in info.sampled:
        sampler.select(index=info.sampled[0])


def run_watch_record(
    path: str,
    *,
    interval_s: float,
    gpus: Sequence[int] | None = None,
    duration_s: float | None = None,
    quiet: bool = False,
    stop: threading.Event | None = None,
) -> int:
    """Record every watched GPU to ``path`` until a signal, ``duration_s`` or ``stop`` is set."""
    stop = stop or threading.Event()
    sampler = NvmlSampler(None, interval_s, gpus=gpus)
    info = sampler.open()
    if not info.available:
        print(f"gpudash watch: NVML unavailable: {info.unavailable}", file=sys.stderr)
        return ExitCode.FAILED
    focus_first_watched(sampler)
    try:
        recorder = CsvRecorder(path, watch_metadata(sampler.info, interval_s), gpu_rows=True)
    except (RecordWriteError, OSError) as exc:
        sampler.stop()
        print(f"gpudash: error: cannot write {path}: {exc.strerror or exc}", file=sys.stderr)
        return ExitCode.USAGE
    with _stopped_by_signals(stop) as caught:
        code, status = ExitCode.OK, "done"
        try:
            if not quiet:
                shown = ", ".join(str(i) for i in sampler.info.sampled)
                print(
                    f"gpudash: recording GPU {shown} to {path} every {interval_s:g} s"
                    + (f" for {duration_s:g} s" if duration_s else "; Ctrl-C stops"),
                    file=sys.stderr,
                    flush=True,
                )
            code, status = _record_until(sampler, recorder, stop, duration_s)
            if caught:
                code, status = ExitCode.INTERRUPTED, f"interrupted by {signal.Signals(caught[0]).name}"
        except RecordWriteError as exc:
            print(f"gpudash: error: {exc}", file=sys.stderr)
            code, status = ExitCode.FAILED, f"writing failed: {exc}"
        finally:
            sampler.stop()
            recorder.close(exit_code=int(code), status=status)
    if not quiet:
        print(f"gpudash: {recorder.rows} rows in {path} ({status})", file=sys.stderr, flush=True)
    return code


@contextlib.contextmanager
def _stopped_by_signals(stop: threading.Event) -> Iterator[list[int]]:
    """While the body runs, SIGINT, SIGTERM and SIGHUP set ``stop``; yields the signals caught so
    far. Off the main thread (a test) no handler can be set: ``stop`` alone ends the recording."""
    caught: list[int] = []

    def on_signal(signum: int, frame: Any) -> None:
        caught.append(signum)
        stop.set()

    old = {}
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        try:
            old[sig] = signal.signal(sig, on_signal)
        except ValueError:  # not the main thread
            pass
    try:
        yield caught
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


def _record_until(
    sampler: NvmlSampler, recorder: CsvRecorder, stop: threading.Event, duration_s: float | None
) -> tuple[ExitCode, str]:
    """Write the sampler's ticks until ``stop``, ``duration_s`` or NVML losing the GPU, then the
    ticks since the last write (an interrupt loses none): the exit status and the status line."""
    sampler.start()
    deadline = None if duration_s is None else time.monotonic() + duration_s
    code, status = ExitCode.OK, "done"
    while not stop.wait(POLL_S):
        lost = _write(sampler, recorder)
        if lost is not None:
            print(f"gpudash watch: {lost.message}", file=sys.stderr)
            code, status = ExitCode.FAILED, "NVML lost the GPU"
            break
        if deadline is not None and time.monotonic() >= deadline:
            break
    sampler.stop()
    _write(sampler, recorder)
    return code, status


def _write(sampler: NvmlSampler, recorder: CsvRecorder) -> Event | None:
    """Write what the sampler took since the last call; the event if NVML lost the GPU."""
    lost = None
    for msg in sampler.drain():
        recorder.on_message(msg)
        if isinstance(msg, Event) and msg.kind == EventKind.ERROR:
            lost = msg
    return lost
