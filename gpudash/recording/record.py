"""Recording runs to CSV: ``CsvRecorder`` (also used by the dashboard; headless: ``gpudash.recording.headless``).

Never imports textual (nor torch: the workload runs in the child).

CSV rows follow ``gpudash.recording.csvformat``: a header, then one ``sample`` row per child sample
(joined with the newest NVML sample) and one ``event`` row per event. Each row is written
with a single write and flushed; if a write fails (a full disk) the file is cut back to the
last complete line, so every line in it is whole (``gpudash.recording.line_writers``).

Metadata (GPU, driver, torch version, configuration, start time, why NVML was unavailable,
host, gpudash version) goes to a JSON file beside the CSV: ``run.csv`` → ``run.json``
(``gpudash.recording.metadata``).
With ``-`` (CSV on stdout) no JSON file is written unless ``meta_path`` names one;
diagnostics always go to stderr.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import sys
from typing import Any, TextIO

from gpudash.core import faults
from gpudash.core.compile_table import CompileTable
from gpudash.core.events import SHAPES, Event, EventKind
from gpudash.core.goodput import Goodput, stall_of
from gpudash.core.memory_note import MemoryNote
from gpudash.core.protocol import (
    GOODPUT,
    MEMORY,
    NVML_LOST,
    OUT_OF_MEMORY,
    PHASES,
    PROCESSES,
    GpuSample,
    Message,
    RankSample,
    Sample,
    SyncSites,
)
from gpudash.core.run_facts import RunFacts
from gpudash.core.runstate import RunState
from gpudash.recording import csvformat
from gpudash.recording.line_writers import FdWriter, RecordWriteError, StreamWriter
from gpudash.recording.metadata import meta_path_for, started_metadata
from gpudash.stats.energy import EnergyPerStep
from gpudash.stats.segments import Segment, SegmentTracker

# events after which the configuration that ran before is over: its summary row goes first
_SEGMENT_ENDS = frozenset({EventKind.CHANGED, EventKind.STARTED, EventKind.STOPPED, EventKind.CRASHED})


def facts_of(e: Event) -> dict[str, Any]:
    """What an event adds to run.json (``RunFacts``; none where it has none)."""
    return dict(e.data.values) if isinstance(e.data, RunFacts) else {}


class CsvRecorder:
    """Writes messages as CSV rows; keeps the run's metadata JSON up to date.

    ``path_or_stream``: a path, ``"-"`` for stdout, or an open text stream. ``metadata``:
    see ``metadata.run_metadata``. ``meta_path``: where the JSON goes (default: beside a CSV path;
    none for a stream). ``gpu_rows``: a ``gpu`` row for every NVML sample (``gpudash watch``).
    Raises ``RecordWriteError`` when a row cannot be written.
    """

    def __init__(
        self,
        path_or_stream: str | os.PathLike[str] | TextIO,
        metadata: dict[str, Any] | None = None,
        *,
        meta_path: str | os.PathLike[str] | None = None,
        gpu_rows: bool = False,
    ) -> None:
        self.metadata: dict[str, Any] = dict(metadata or {})
        self.gpu_rows = gpu_rows  # a row per NVML sample, no workload's to join (gpudash watch)
        if isinstance(path_or_stream, (str, os.PathLike)) and str(path_or_stream) != "-":
            self.path: str | None = str(path_or_stream)
            self._out: FdWriter | StreamWriter = FdWriter(self.path)
            self.meta_path: str | None = str(meta_path or meta_path_for(self.path))
        else:
            stream = sys.stdout if isinstance(path_or_stream, (str, os.PathLike)) else path_or_stream
            self.path = None
            self._out = StreamWriter(stream)
            self.meta_path = str(meta_path) if meta_path else None
        self.rows = 0  # data rows (the header not counted)
        self.kinds: dict[str, int] = {}  # data rows by row_kind ("sample": a throughput window's, …)
        self.gpus: tuple[int, ...] = tuple(self.metadata.get("gpus_sampled") or ())  # per-GPU columns
        self.samples = 0
        self.last_sample: Sample | None = None
        self.last_gpu: GpuSample | None = None
        self.run = RunState()  # what runs now, for event rows
        self._energy = EnergyPerStep()
        # for the summary row of each configuration that ends: only the current one is read, so only it
        # is kept (64 segments of statistics were ~4 MiB held for nothing through a long run)
        self._segments = SegmentTracker(max_segments=1)
        self._summarized: Segment | None = None
        self._write_failed = False
        self._fault = faults.of_kind("csv-write")  # test-only: a data row that fails to write
        self.summaries: list[str] = []  # one line per configuration that ended, as in the CSV
        self._closed = False
        self._tables_unwritten = False  # sync sites or compiles noted since the JSON was last written
        self.compiles = CompileTable()  # a compiled job's compiles and graph breaks (run.json's ``compile``)
        self.metadata.setdefault("csv_columns", csvformat.header(self.gpus))
        try:
            # first: an unwritable CSV leaves no JSON behind
            self._out.write(csvformat.format_row(csvformat.header(self.gpus)))
        except RecordWriteError:
            self._out.close()
            raise
        self.write_metadata()

    # -- writing -----------------------------------------------------------------------------------
    def on_message(self, msg: Message) -> None:
        """Record one message (GPU samples are joined into the next sample row)."""
        if isinstance(msg, GpuSample):
            self.last_gpu = msg
            self._segments.on_gpu(msg)
            if self.gpu_rows:
                self._write(csvformat.gpu_row(msg), msg)
        elif isinstance(msg, Sample):
            self._write(csvformat.sample_row(msg, self.last_gpu, self._derived(msg)), self.last_gpu)
            self.samples += 1
            self.last_sample = msg
            self.run.observe_sample(msg)
            self._segments.on_sample(msg)
        elif isinstance(msg, Event):
            if msg.kind in _SEGMENT_ENDS:
                self._write_summary(msg.time_s)  # the configuration that ends here
            self._segments.on_event(msg)
            self.run.observe(msg)
            if msg.kind == EventKind.ERROR and msg.what == NVML_LOST:
                self.last_gpu = None  # no GPU columns from here on, not the last values repeated
            self._write(csvformat.event_row(msg, self.run.running))
            if self.compiles.on_event(msg):
                self.metadata["compile"] = self.compiles.as_dict()
                self._tables_unwritten = True  # written when the configuration ends, and at close
            elif msg.kind == EventKind.STARTED:
                self.note_started(msg)
            elif msg.kind in (EventKind.MEASURED, EventKind.STALLED):
                self._note_phases(msg)
            elif msg.kind == EventKind.ERROR and msg.what == OUT_OF_MEMORY:
                self.metadata["out_of_memory"] = {"message": msg.message, **facts_of(msg)}
                self.write_metadata()
        elif isinstance(msg, SyncSites):
            self._note_sync_sites(msg)
        elif isinstance(msg, RankSample):
            self._write(csvformat.rank_row(msg, self.run.running))

    def _note_sync_sites(self, msg: SyncSites) -> None:
        """The JSON's ``sync_sites``: each configuration's latest table (written at once the first
        time, then when the configuration ends and at close)."""
        tables = self.metadata.setdefault("sync_sites", {})
        first = msg.configuration not in tables
        tables[msg.configuration] = {
            "workload": msg.workload,
            "variant": msg.variant,
            "batch_size": msg.batch_size,
            "knobs": msg.knobs,
            "not_counted": msg.not_counted,
            **msg.table.as_dict(),
        }
        self._tables_unwritten = True
        if first:
            self.write_metadata()

    def _note_phases(self, e: Event) -> None:
        """A job's wall time by phase and goodput (``phases``, ``goodput_pct``, ``wall_s``), its steps at
        a new shape (``new_shapes``), each
        stall told (``stalls``: when, how long, where each thread waited), and the processes that
        stepped as one rank (``processes``, ``steps_combined``), into the JSON."""
        if e.kind == EventKind.STALLED:
            report = stall_of(e)
            where = list(report.where) if report is not None else []
            stall = {"time_s": round(e.time_s, 3), "message": e.message, "where": where}
            self.metadata.setdefault("stalls", []).append(stall)
        elif e.what == GOODPUT and isinstance(e.data, Goodput):
            account = e.data
            self.metadata["phases"] = {k: round(account.seconds[k], 3) for k in PHASES if k in account.seconds}
            self.metadata["wall_s"] = round(account.wall_s, 3)
            self.metadata["goodput_pct"] = None if account.pct is None else round(account.pct, 2)
        elif e.what == SHAPES:  # a compiled job's steps at a new shape: out of its steady rate, their cost
            self.metadata["new_shapes"] = {"line": e.message, **facts_of(e)}
        elif e.what == MEMORY:  # a job's memory by kind: the latest (the end's, with its peak)
            self.metadata["memory"] = e.data.run_json() if isinstance(e.data, MemoryNote) else {}
        elif e.what == PROCESSES:  # several processes stepped as a rank: each one's steps, and how they add up
            facts = facts_of(e)
            self.metadata["processes"] = facts.get("processes", [])
            self.metadata["steps_combined"] = facts.get("steps_combined", "")
        else:
            return
        self.write_metadata()

    def _write_summary(self, time_s: float) -> None:
        """A summary row for the current configuration, once (at its end)."""
        seg = self._segments.current
        if seg is not None and seg is not self._summarized:
            self._summarized = seg
            self._write(csvformat.summary_row(seg, time_s))
            self.summaries.append(seg.summary())
        if self._tables_unwritten:
            self.write_metadata()

    @property
    def current_segment(self) -> Segment | None:
        """The configuration running now, with its statistics so far."""
        return self._segments.current

    def close(self, **final: Any) -> None:
        """Close the CSV; ``final`` items are added to the metadata (e.g. exit status)."""
        if self._closed:
            return
        self._closed = True
        if not self._write_failed:  # after a failed write (a full disk) nothing more is written
            try:
                self._write_summary(self.last_sample.time_s if self.last_sample else 0.0)
            except RecordWriteError:
                pass  # the rows before stay whole
        self.metadata.update(final)
        self.metadata["end_time"] = _dt.datetime.now().astimezone().isoformat(timespec="seconds")
        self.metadata["rows"] = self.rows
        self.write_metadata()
        self._out.close()

    def write_metadata(self) -> None:
        """(Re)write the JSON beside the CSV, atomically; a failure is one line on stderr."""
        if not self.meta_path:
            return
        tmp = f"{self.meta_path}.tmp"
        try:
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(self.metadata, f, indent=2, default=str)
                f.write("\n")
            os.replace(tmp, self.meta_path)
            self._tables_unwritten = False
        except OSError as exc:
            print(f"gpudash: cannot write {self.meta_path}: {exc.strerror or exc}", file=sys.stderr)
            try:
                os.unlink(tmp)
            except OSError:
                pass

    # -- internals ------------------------------------------------------------------------------------
    def _write(self, row: list[str], gpu: GpuSample | None = None) -> None:
        """Write ``row`` and its per-GPU cells (``gpu``'s readings; none: empty cells)."""
        row = csvformat.row_cells(row, gpu, self.gpus)
        injected = self._fault.fails_row(self.rows + 1) if self._fault is not None else None
        try:
            if injected is not None:
                raise RecordWriteError(injected.errno, f"cannot write {self.path or 'the CSV'}: {injected.strerror}")
            self._out.write(csvformat.format_row(row))
        except RecordWriteError:
            self._write_failed = True
            raise
        self.rows += 1
        self.kinds[row[0]] = self.kinds.get(row[0], 0) + 1

    def _derived(self, s: Sample) -> dict[str, float | None]:
        """The derived metrics of a sample row: J/step as ``gpudash.stats.energy`` defines it."""
        g = self.last_gpu
        energy = g.energy_j if g is not None else None
        return {"joules_per_step": self._energy.update(s.time_s, energy, s.steps)}

    def note_started(self, started: Event) -> None:
        """What the run's "started" event says (torch, CUDA, device; a job's settings) into the metadata."""
        self.metadata.update(started_metadata(started, self.metadata))
        self.write_metadata()
