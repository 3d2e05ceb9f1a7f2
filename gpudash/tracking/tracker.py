"""``gpudash.track()`` and the ``Tracker`` it returns: the public API (docs/track.md).

``step()`` is all the training loop pays for: a few attribute updates, and on CUDA one event
recorded per group of steps (about every 25 ms) on the stream current when ``track()`` was called; never a host-device
sync, never a write. Everything else happens on the writer thread (``gpudash.tracking.writer``).

Errors: bad arguments to ``track()`` raise at once (``ValueError``, or ``OSError`` for a file
that cannot be created), each with a one-line message. After that, nothing the tracker does
raises into the training loop: a failed write, a bad argument to ``step()``/``mark()``, an
error of its own is one line on stderr, the recording stops (the file keeps every whole row it
had) and the tracker's methods do nothing from then on. NVML losing the GPU is an ``error`` row
and one line on stderr; the recording goes on without GPU columns.
"""

from __future__ import annotations

import atexit
import contextlib
import math
import os
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from gpudash.boot.gpudash_boot import wire as job_wire
from gpudash.core.protocol import EventKind, RunConfig
from gpudash.core.textfmt import strip_controls
from gpudash.engine.measure import SyncCounter
from gpudash.host.devices import cuda_index_hint
from gpudash.host.nvml import NvmlSampler
from gpudash.recording.metadata import meta_path_for, run_metadata
from gpudash.recording.record import CsvRecorder
from gpudash.tracking.context import Device, Rank, check_path, rank_of_job, rank_path, resolve_device, start_of
from gpudash.tracking.timing import CudaStamps, Note, StepStamps
from gpudash.tracking.writer import CLOSE_WAIT_S, Writer

MAX_TEXT = 200  # characters of a label or a mark kept
MIN_INTERVAL_S = 0.05


@dataclass
class SyncWindow:
    """What ``count_syncs()`` counted once its block has ended: host-device syncs (CUDA only:
    ``None`` on the CPU) over the steps issued in the block."""

    steps: int = 0
    syncs: int | None = None

    @property
    def per_step(self) -> float | None:
        return self.syncs / self.steps if self.syncs is not None and self.steps else None


class Tracker:
    """A recording of this process's training loop to ``path`` (gpudash's CSV, ``PATH.json`` beside
    it), for ``gpudash replay [--follow]`` and ``gpudash report``: ``gpudash.track(path, ...)``, the
    same class, starts one. Call ``step()`` after each step.

    ``label``: the run's name (the ``workload`` column). ``batch_size``: what ``step()`` counts
    without ``samples=`` (default: the first step's samples, else 1). ``interval_s``: a sample
    row (and an NVML sample) this often. ``device``: ``None`` times on CUDA when torch is
    imported and CUDA available, else with the wall clock; or ``"cpu"``, ``"cuda"``,
    ``"cuda:N"``. ``per_rank``: in a data-parallel job each rank writes ``PATH`` with its rank
    in the name (``run.rank1.csv``); by default only rank 0 writes. ``syncs``: count every
    host-device sync of this thread until ``close()`` and name its source line (CUDA; the sample
    rows carry syncs per step, the JSON beside the file the sync table): off by default, since it
    sets torch's sync debug mode, a global setting. An existing file is replaced.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        label: str = "train",
        batch_size: int | None = None,
        interval_s: float = 0.5,
        device: str | None = None,
        per_rank: bool = False,
        syncs: bool = False,
    ) -> None:
        if not isinstance(label, str) or not strip_controls(label).strip():
            raise ValueError(f"gpudash.track: label must be a non-empty string, got {label!r}")
        if batch_size is not None and (
            isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1
        ):
            raise ValueError(f"gpudash.track: batch_size must be a whole number ≥ 1, got {batch_size!r}")
        if isinstance(interval_s, bool) or not isinstance(interval_s, (int, float)) or not interval_s >= MIN_INTERVAL_S:
            raise ValueError(
                f"gpudash.track: interval_s must be a number of seconds ≥ {MIN_INTERVAL_S}, got {interval_s!r}"
            )
        if not math.isfinite(interval_s):
            raise ValueError(f"gpudash.track: interval_s must be finite, got {interval_s!r}")
        p = check_path(path)
        self.label = _text(label)
        self.rank: Rank = rank_of_job()
        self.device: Device = resolve_device(device)
        self._batch = batch_size or 1  # what a step without samples= counts
        self._off = True  # step() and mark() do nothing (not writing, closed, or failed)
        self._issued = 0  # steps issued (step() calls)
        self._sync_counter: SyncCounter | None = None
        self._sites_counter: SyncCounter | None = None  # syncs=True: counting until close()
        self._warned: set[str] = set()
        self._closed = False
        self._pid = os.getpid()
        self._lock = threading.Lock()  # close() from the loop and from atexit
        self.path: Path | None = None  # None: this rank does not write (per_rank=False, rank > 0)
        self._writer: Writer | None = None
        self._under_gpudash = bool(os.environ.get(job_wire.CHANNEL_ENV))  # a job of gpudash's: its hooks told
        self._job_step: Any = _job_step() if self._under_gpudash else None
        if self.rank.rank != 0 and not per_rank:
            return
        self.path = rank_path(p, self.rank.rank) if per_rank else p
        self._stamps: StepStamps = CudaStamps(self.device.torch) if self.device.cuda else StepStamps()
        self._writer = self._make_writer(self.path, batch_size, interval_s)
        self._off = False
        if syncs:
            self._count_sync_sites()
        atexit.register(self._at_exit)
        self._writer.start()

    def _make_writer(self, path: Path, batch_size: int | None, interval_s: float) -> Writer:
        t0 = time.monotonic()
        start = start_of(self.device)
        sampler = NvmlSampler(cuda_index_hint(self.device.name), interval_s, t0=t0)
        info = sampler.open()
        if info.available and start.gpu_uuid:
            sampler.select(uuid=start.gpu_uuid)  # the GPU CUDA calls this device
            info = sampler.info
        config: dict[str, Any] = {
            "device": self.device.name,
            "sample_interval_s": interval_s,
            "gpu_interval_s": interval_s,
            "knobs": "none",
        }
        meta = run_metadata(
            RunConfig(device=self.device.name),
            info,
            recorded_by="gpudash.track",
            label=self.label,
            command=" ".join(sys.argv),
            rank=self.rank.rank,
            world_size=self.rank.world_size,
            device=self.device.name,
        )
        meta["config"] = config  # not a RunConfig's: the label is no workload of gpudash's catalog
        try:
            recorder = CsvRecorder(path, meta)
        except OSError as exc:
            sampler.stop()
            raise type(exc)(f"gpudash.track: cannot create {path}: {exc.strerror or exc}") from None
        recorder.meta_path = None  # the writer writes the metadata (its failures are warnings)
        writer = Writer(
            recorder,
            self._stamps,
            sampler if info.available else None,
            label=self.label,
            batch_size=batch_size,
            device=self.device,
            rank=self.rank,
            interval_s=interval_s,
            t0=t0,
            meta_path=str(meta_path_for(path)),
            config=config,
            warn=self._warn,
            syncs=lambda: (self._sync_counter, self._issued),
            on_fail=self._turn_off,
        )
        writer.start_note = start
        if not info.available:
            sampler.stop()
        return writer

    # -- the training loop's calls ---------------------------------------------------------------------
    def step(self, samples: int | None = None) -> None:
        """One training step has been issued, having trained ``samples`` samples (default: the
        ``batch_size`` given to ``track``, else 1). Costs no sync and no write. In a job run under
        gpudash (``gpudash -- python train.py``), gpudash's hooks are told: where the job steps no
        optimizer, these are its steps."""
        try:
            n = self._batch if samples is None else samples.__index__()
        except Exception:  # noqa: BLE001 - a bad argument never stops the training
            n = -1
        if self._under_gpudash:
            self._tell_gpudash(n)
        if self._off:
            return
        if n < 0:
            self._stop_on_error(f"step(samples={samples!r}): samples must be a whole number ≥ 0")
            return
        try:
            self._issued += 1
            self._stamps.add(n)
        except Exception as exc:  # noqa: BLE001
            self._stop_on_error(f"step(): {type(exc).__name__}: {exc}")

    def _tell_gpudash(self, samples: int) -> None:
        """gpudash's hooks in this process told of the step (found at the first step where the job
        had not imported torch at ``track()``)."""
        if self._job_step is None:
            self._job_step = _job_step()
        if self._job_step is not None:
            self._job_step(max(samples, 0), self.device.name)

    def mark(self, text: str) -> None:
        """A change in the loop (a new learning rate, unfrozen layers): a marker on every chart,
        and the steps after it are a new stretch named ``text``, compared with the one before."""
        if self._off:
            return
        if not isinstance(text, str) or not strip_controls(text).strip():
            self._stop_on_error(f"mark({text!r}): the text must be a non-empty string")
            return
        try:
            self._stamps.mark(_text(text))
            assert self._writer is not None
            self._writer.wake()
        except Exception as exc:  # noqa: BLE001
            self._stop_on_error(f"mark(): {type(exc).__name__}: {exc}")

    def _count_sync_sites(self) -> None:
        """``syncs=True``: every host-device sync of this thread from now to ``close()`` counted and
        attributed to its line (CUDA only): torch's sync debug mode is "warn" meanwhile, a global
        setting, hence off by default. The table goes to the JSON beside the file (``sync_sites``)."""
        try:
            counter = SyncCounter(sites=True)
            counter.install(self.device.torch if self.device.cuda else None)
            counter.attributing = True  # no engine around the steps: every sync of the thread is the loop's
            self._sync_counter = counter
            self._sites_counter = counter
        except Exception as exc:  # noqa: BLE001
            self._warn("syncs", f"syncs=True: {type(exc).__name__}: {exc}; syncs are not counted")

    @contextlib.contextmanager
    def count_syncs(self) -> Iterator[SyncWindow]:
        """Count the host-device syncs in the steps of the ``with`` block (CUDA only), as the
        engine does: torch's sync debug mode set to "warn" for the block, its warnings counted
        (and not printed) in this thread. The samples written meanwhile carry syncs per step; at
        the end a ``measured`` row (what=syncs) says the total."""
        window = SyncWindow()
        counter: SyncCounter | None = None
        if not self._off and self._sync_counter is None:
            try:
                counter = SyncCounter()
                counter.install(self.device.torch if self.device.cuda else None)
                self._sync_counter = counter
            except Exception as exc:  # noqa: BLE001
                counter = None
                self._stop_on_error(f"count_syncs(): {type(exc).__name__}: {exc}")
        issued0 = self._issued
        try:
            yield window
        finally:
            if counter is not None:
                self._sync_counter = None
                with contextlib.suppress(Exception):
                    counter.uninstall()
                window.steps = self._issued - issued0
                window.syncs = counter.count if self.device.cuda else None
                self._note_syncs(window)

    def _note_syncs(self, window: SyncWindow) -> None:
        if self._off:
            return
        if window.per_step is None:
            message = f"syncs are counted on CUDA only ({window.steps} steps on {self.device.name})"
        else:
            message = f"{window.per_step:.2f} syncs per step ({window.syncs} in {window.steps} steps)"
        details = {"steps": str(window.steps), "syncs": "" if window.syncs is None else str(window.syncs)}
        try:
            self._stamps.note(Note("syncs", message, details))
        except Exception as exc:  # noqa: BLE001
            self._stop_on_error(f"count_syncs(): {type(exc).__name__}: {exc}")

    # -- the end -----------------------------------------------------------------------------------------
    def close(self) -> None:
        """Count the steps issued (waiting, without a sync, up to 10 s for the GPU to finish
        them), write the last sample and a ``stopped`` row, close the file. Idempotent."""
        self._end((EventKind.STOPPED, ""))

    def __enter__(self) -> Tracker:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._end(_ending(exc))

    def _at_exit(self) -> None:
        if os.getpid() == self._pid:  # not in a forked child (a DataLoader's worker)
            self._end(_ending(getattr(sys, "last_value", None)))

    def _end(self, ending: tuple[EventKind, str], error: str | None = None, wait: bool = True) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        atexit.unregister(self._at_exit)
        writer = self._writer
        if writer is None:
            return
        if not self._off:
            self._off = True
            with contextlib.suppress(Exception):
                self._stamps.close_group()
            writer.stop(ending, error)
        if wait:
            writer.join(CLOSE_WAIT_S + 5.0)
        counter, self._sites_counter = self._sites_counter, None
        if counter is not None:  # the sync debug mode and the warning filters as they were
            with contextlib.suppress(Exception):
                counter.uninstall()

    def _stop_on_error(self, why: str) -> None:
        """An error of the caller's after construction: one line, and the recording ends (not waited for)."""
        self._warn("fatal", f"{why}; recording stopped, training goes on")
        self._end((EventKind.STOPPED, f"recording stopped: {why}"), error=why, wait=False)
        if self._writer is not None:
            atexit.register(self._join_at_exit)  # the end is written by the writer thread: let it finish

    def _join_at_exit(self) -> None:
        if self._writer is not None and os.getpid() == self._pid:
            self._writer.join(CLOSE_WAIT_S + 5.0)

    def _turn_off(self) -> None:
        self._off = True
        self._closed = True

    def _warn(self, topic: str, line: str) -> None:
        """One line on stderr per topic (never the warnings module: a -W error must not raise here)."""
        if topic in self._warned:
            return
        self._warned.add(topic)
        with contextlib.suppress(Exception):
            print(f"gpudash.track: warning: {line}", file=sys.stderr, flush=True)


def _ending(exc: BaseException | None) -> tuple[EventKind, str]:
    """The end row for a loop that ended with ``exc`` (None: normally)."""
    if exc is None:
        return (EventKind.STOPPED, "")
    if isinstance(exc, KeyboardInterrupt):
        return (EventKind.STOPPED, "interrupted (KeyboardInterrupt)")
    return (EventKind.CRASHED, f"the training loop raised {type(exc).__name__}: {exc}")


def _text(text: str) -> str:
    """A label or a mark as the CSV keeps it: one line, no control characters, at most MAX_TEXT."""
    return " ".join(strip_controls(text).split())[:MAX_TEXT]


# ``gpudash.track(path, ...)`` is the class itself: calling it starts a recording
track = Tracker


def _job_step() -> Any:
    """The step function of gpudash's hooks in this process (a job run under gpudash), or None."""
    hooks = sys.modules.get(job_wire.HOOKS_MODULE)
    return getattr(hooks, job_wire.TRACKED_STEP, None)
