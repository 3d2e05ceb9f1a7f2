"""The tracker's background thread: completed steps and NVML samples become CSV rows.

One daemon thread per tracker. Every ``interval_s`` (at once after a mark or ``stop``; every
``FIRST_POLL_S`` until the first step has completed; every ``MARKER_POLL_S`` while a mark waits
for the steps before it to complete) it collects the steps whose stamps have completed
(``gpudash.tracking.timing``), takes an NVML sample (``gpudash.host.nvml.NvmlSampler``, driven
by this thread, not its own) and writes a ``Sample`` of the steps completed since the last one.
Rows go through
``gpudash.recording.record.CsvRecorder``, as ``gpudash record``'s do: each a single write,
flushed, a failed write cut back, so the file only ever holds whole rows. The metadata JSON
beside it is written here (the recorder's own writing is off): a failure is one warning, and
the CSV goes on.

Anything that goes wrong in this thread is one line on stderr and the end of the recording;
the training loop never sees it.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from gpudash.core.protocol import Event, EventKind, GpuSample, Sample, SyncSites
from gpudash.core.running import Running
from gpudash.core.start_note import StartNote
from gpudash.engine.measure import SyncCounter, cuda_memory_mib
from gpudash.host.nvml import NvmlSampler
from gpudash.recording.line_writers import RecordWriteError
from gpudash.recording.record import CsvRecorder
from gpudash.tracking.context import Device, Rank
from gpudash.tracking.timing import Done, Mark, Note, StepStamps, weighted_percentile

# Until the first step completes, how often to look for it (its completion starts the recording).
# After it the thread wakes once per sample: each look at the stamps is CUDA calls in the training
# process, and the stamps wait in a bounded queue (``timing.MAX_PENDING``) in between.
FIRST_POLL_S = 0.05
# While a mark (or a note) waits behind steps the GPU has not finished, how often to look again:
# the stretch before it ends when it is taken, so this bounds how late its boundary is placed.
MARKER_POLL_S = 0.005
SITES_EVERY = 4  # with syncs=True: the sync table goes to the JSON every this many samples (and at the end)
CLOSE_WAIT_S = 10.0  # at close, how long the steps already issued may take to complete on the GPU
TRACK_ERROR = "track"  # the ``what`` of the error row the tracker writes when it stops on an error

Warn = Callable[[str, str], None]  # (topic, line): one line on stderr per topic
SyncProbe = Callable[[], tuple[SyncCounter | None, int]]  # (the counter now, steps issued so far)


class Window:
    """The steps completed since the last sample."""

    def __init__(self, start: float, syncs: tuple[SyncCounter | None, int, int]) -> None:
        self.start = start
        self.steps = 0
        self.samples = 0
        self.timed: list[tuple[float, int]] = []  # (ms, steps): one per group, bounded by the interval
        self.syncs = syncs  # (counter, its count, steps issued) when the window opened

    def add(self, done: Done) -> None:
        self.steps += done.steps
        self.samples += done.samples
        if done.ms is not None:
            self.timed.append((done.ms, done.steps))


class Writer:
    """Turns what the training thread stamps into rows, on a thread of its own."""

    def __init__(
        self,
        recorder: CsvRecorder,
        stamps: StepStamps,
        sampler: NvmlSampler | None,
        *,
        label: str,
        batch_size: int | None,
        device: Device,
        rank: Rank,
        interval_s: float,
        t0: float,
        meta_path: str,
        config: dict[str, Any],
        warn: Warn,
        syncs: SyncProbe,
        on_fail: Callable[[], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.recorder = recorder
        self.stamps = stamps
        self.sampler = sampler
        self.label = label
        self.phase = "start"  # the variant column: the latest mark's text
        self.batch_size = batch_size
        self.device = device
        self.rank = rank
        self.interval_s = interval_s
        self.t0 = t0
        self.meta_path = meta_path
        self.config = config
        self.warn = warn
        self.syncs = syncs
        self.on_fail = on_fail
        self.clock = clock
        self.start_note = StartNote()  # what the "started" event says (the tracker fills it in)
        self.steps = 0  # completed steps, in all
        self.samples = 0
        self.failed = False
        self._window: Window | None = None  # None until the first step completed
        self._site_samples = 0  # samples written while sync sites were counted
        self._next_sample = 0.0
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._ending: tuple[EventKind, str] = (EventKind.STOPPED, "")
        self._error: str | None = None  # why the tracker stopped on an error of the caller's
        self._thread = threading.Thread(target=self._run, name="gpudash-track", daemon=True)

    # -- from the training thread ---------------------------------------------------------------------
    def start(self) -> None:
        self._thread.start()

    def wake(self) -> None:
        """Collect now (a mark was made)."""
        self._wake.set()

    def stop(self, ending: tuple[EventKind, str] = (EventKind.STOPPED, ""), error: str | None = None) -> None:
        """Finish: wait for the issued steps, write the last sample and the end, close the file."""
        self._ending, self._error = ending, error
        self._stop.set()
        self._wake.set()

    def join(self, timeout: float) -> None:
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    # -- the thread ---------------------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            if self.device.cuda:  # this thread's current device: the events' (CUDA's is per thread)
                self.device.torch.cuda.set_device(self.device.index)
            self._event(EventKind.STARTING, message=f"tracking {self.label} in pid {os.getpid()} on {self.device.name}")
            while not self._stop.is_set():
                self._wake.wait(self._until_next_tick(self.clock()))
                self._wake.clear()
                self._tick(self.clock())
            self._finish()
        except Exception as exc:  # noqa: BLE001 - never into the training loop: one line, the recording ends
            self._fail(exc)

    def _until_next_tick(self, now: float) -> float:
        """Seconds to wait: to the next sample; less until the first step is in, or while a mark
        waits for the steps before it."""
        if self._window is None:
            return FIRST_POLL_S
        wait = max(0.0, self._next_sample - now)
        return min(wait, MARKER_POLL_S) if self.stamps.marker_waiting else wait

    def _tick(self, now: float) -> None:
        for item in self.stamps.collect():
            self._take(item, now)
        if self._window is not None and now >= self._next_sample:
            self._sample(now)

    def _take(self, item: Done | Mark | Note, now: float) -> None:
        if isinstance(item, Done):
            if self._window is None:
                self._begin(item, now)
            assert self._window is not None
            self._window.add(item)
            self.steps += item.steps
            self.samples += item.samples
        elif isinstance(item, Mark):
            if self._window is None:  # a mark before the first step names the first stretch
                self.phase = item.text
                return
            self._sample(now, force=True)  # the stretch before the mark ends here
            before, self.phase = self.phase, item.text
            self._event(EventKind.CHANGED, "mark", before, item.text, f"mark: {item.text}", running=self._running())
        else:
            self._event(EventKind.MEASURED, item.what, message=item.message, details=item.details)

    def _begin(self, first: Done, now: float) -> None:
        """The first step has completed: the run has started (its batch size is known now)."""
        if self.batch_size is None:
            self.batch_size = first.samples // max(1, first.steps) or 1
        self._event(
            EventKind.STARTED,
            message=f"started tracking {self.label} (batch {self.batch_size}) on {self.device.name}",
            details=self.start_note.details(),
            data=self.start_note,
            running=self._running(),
        )
        self.recorder.metadata["config"] = dict(self.config)  # the label is no workload of the catalog's
        self._write_metadata()
        self._open_window(now)

    def _running(self) -> Running:
        return Running(
            self.label, self.phase, self.batch_size or 1, device=self.device.name, world_size=self.rank.world_size
        )

    def _open_window(self, now: float) -> None:
        counter, issued = self.syncs()
        self._window = Window(now, (counter, counter.count if counter else 0, issued))
        self._next_sample = now + self.interval_s

    def _sample(self, now: float, force: bool = False) -> None:
        """The window as a sample row, with NVML's latest sample joined; a new window opens."""
        w = self._window
        assert w is not None
        interval = now - w.start
        if interval <= 0 or (force and w.steps == 0):
            self._open_window(now)
            return
        self._nvml()
        allocated, reserved = self._allocator()
        self.recorder.on_message(
            Sample(
                time_s=now - self.t0,
                workload=self.label,
                variant=self.phase,
                batch_size=self.batch_size or 1,
                steps=self.steps,
                samples=self.samples,
                interval_s=interval,
                steps_per_s=w.steps / interval,
                samples_per_s=w.samples / interval,
                step_ms_p50=weighted_percentile(w.timed, 50) if w.timed else None,
                step_ms_p95=weighted_percentile(w.timed, 95) if w.timed else None,
                syncs_per_step=self._syncs_per_step(w),
                world_size=self.rank.world_size,
                cuda_allocated_mib=allocated,
                cuda_reserved_mib=reserved,
            )
        )
        self._sync_sites(now)
        self._open_window(now)

    def _sync_sites(self, now: float, final: bool = False) -> None:
        """With ``track(..., syncs=True)``: the run's sync table so far, every few samples, into the
        JSON beside the file (``sync_sites``)."""
        counter, issued = self.syncs()
        if counter is None or counter.sites is None or issued == 0:
            return
        self._site_samples += 1
        if self._site_samples % SITES_EVERY != 1 and not final:
            return
        table = counter.sites.table(issued)
        self.recorder.on_message(
            SyncSites(
                now - self.t0,
                self.label,
                "whole run",
                self.batch_size or 1,
                "none",
                table,
                counter.explicit_not_counted or "",
            )
        )

    def _syncs_per_step(self, w: Window) -> float | None:
        """Syncs per step issued in the window, when ``count_syncs`` counted through all of it."""
        counter0, count0, issued0 = w.syncs
        counter, issued = self.syncs()
        if counter is None or counter is not counter0 or issued <= issued0:
            return None
        return (counter.count - count0) / (issued - issued0)

    def _allocator(self) -> tuple[float | None, float | None]:
        """What torch's caching allocator holds on the device, MiB (host-side counters: no sync)."""
        if not self.device.cuda:
            return None, None
        allocated, reserved, _peak = cuda_memory_mib(self.device.torch, self.device.index)
        return allocated, reserved

    def _nvml(self) -> None:
        """An NVML sample now, into the recorder (joined to the next sample row)."""
        if self.sampler is None:
            return
        self.sampler.sample()
        for msg in self.sampler.drain():
            if isinstance(msg, Event):  # NVML lost the GPU: an error row; the recording goes on
                self.warn("nvml", f"{msg.message} (the recording goes on)")
                self.recorder.on_message(msg)
            elif isinstance(msg, GpuSample):
                self.recorder.on_message(msg)

    def _event(
        self, kind: EventKind, what: str = "", before: str = "", after: str = "", message: str = "", **kw: Any
    ) -> None:
        self.recorder.on_message(Event(self.clock() - self.t0, kind, what, before, after, message, **kw))

    def _finish(self) -> None:
        """The end: every step issued counted (their times where read back), the last sample, the end row."""
        deadline = self.clock() + CLOSE_WAIT_S
        while not self.stamps.all_complete() and self.clock() < deadline:
            time.sleep(0.002)  # query() only: the steps already issued finish on the GPU
        now = self.clock()
        unseen = self._window is None  # no step was in before the end (a short loop, a busy machine)
        for item in self.stamps.rest():
            self._take(item, now)
        if self._window is not None:
            if unseen:  # its steps came since tracking began, not at this instant: not a window of 0 s
                self._window.start = min(self._window.start, self.t0)
            self._sample(now, force=True)
        self._sync_sites(now, final=True)
        if self._error is not None:
            self._event(EventKind.ERROR, TRACK_ERROR, message=self._error)
        kind, message = self._ending
        self._event(kind, message=message or f"stopped tracking after {self.steps} steps")
        self._close(status=kind.value)

    def _close(self, status: str, metadata: bool = True) -> None:
        """Stop NVML, close the CSV (its last summary row), and write the metadata a last time."""
        if self.sampler is not None:
            self.sampler.stop()
        self.recorder.close(steps=self.steps, status=status)
        if metadata:
            self.recorder.metadata["config"] = dict(self.config)
            self._write_metadata()

    def _write_metadata(self) -> None:
        """The metadata JSON beside the CSV, atomically; a failure is one warning, the CSV goes on."""
        tmp = f"{self.meta_path}.tmp"
        try:
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(self.recorder.metadata, f, indent=2, default=str)
                f.write("\n")
            os.replace(tmp, self.meta_path)
        except OSError as exc:
            self.warn("json", f"cannot write {self.meta_path}: {exc.strerror or exc}; the CSV goes on")
            try:
                os.unlink(tmp)
            except OSError:
                pass

    def _fail(self, exc: Exception) -> None:
        """An error in this thread: one line, the tracker off, the file closed with what it has."""
        self.failed = True
        self.on_fail()
        if isinstance(exc, RecordWriteError):
            why = exc.strerror or str(exc)  # "cannot write run.csv: No space left on device"
        else:
            why = f"internal error ({type(exc).__name__}: {exc})"
        self.warn("fatal", f"{why}; recording stopped, training goes on")
        try:
            written = not isinstance(exc, RecordWriteError)  # after a failed write nothing more is written
            if written:
                self._event(EventKind.ERROR, TRACK_ERROR, message=why)
                self._event(EventKind.STOPPED, message=f"recording stopped after {self.steps} steps: {why}")
            self._close(status="failed", metadata=written)
        except Exception:  # noqa: BLE001 - the file keeps its whole rows; nothing more to say
            if self.sampler is not None:
                self.sampler.stop()
