"""Read recordings for ``gpudash report``: a ``--record`` CSV (or a dashboard recording) or a
``sweep.csv``, checked row by row. Torch-, Textual- and matplotlib-free.

A recording becomes a ``Run``: its configurations' figures (``ConfigFigures``, one per segment
of a recording, one per configuration of a sweep) and, for a recording, its timeline
(throughput and GPU utilisation over time, and the change markers). A recording's segments are
rebuilt from its sample rows with ``SegmentTracker``, the code that wrote its summary rows,
so the report and the file agree. The files are read as ``gpudash replay`` reads them: the CSV
by the one bounded reader (``csvread.read_table``: records of at most 1 MiB, no control
characters), the metadata by ``sidecar.read_sidecar`` (ignored, with a note, when bad).
Anything that is not a whole gpudash CSV raises ``ReportInputError`` with one line that names
the file (and the line).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpudash.core.goodput import span_of
from gpudash.core.metrics import FIGURE_KEYS
from gpudash.core.protocol import (
    NOT_THE_JOBS,
    OTHER,
    PHASES,
    TRACE,
    TRAINING,
    WORLD,
    Event,
    EventKind,
    GpuSample,
    Message,
    RankSample,
    Sample,
)
from gpudash.core.textfmt import clip, strip_controls
from gpudash.job.wall_time import phases_line
from gpudash.recording.csvformat import RowParser, is_recording_header
from gpudash.recording.csvread import UnreadableCsv, read_table
from gpudash.recording.sidecar import Sidecar, read_sidecar
from gpudash.stats.batch_means import pool_estimates
from gpudash.stats.comparison import Estimate
from gpudash.stats.fmt import fmt_ratio
from gpudash.stats.segments import ConfigKey, Segment, SegmentTracker
from gpudash.sweep.csv_rows import CSV_COLUMNS as SWEEP_COLUMNS
from gpudash.sweep.csv_rows import OLD_CSV_COLUMNS as OLD_SWEEP_COLUMNS
from gpudash.sweep.readback import summary_from_row


class ReportInputError(Exception):
    """A file ``gpudash report`` cannot read: the message is one line."""


@dataclass(frozen=True)
class ConfigFigures:
    """One configuration's figures in one run: a recording's segment, or a sweep's summary."""

    key: ConfigKey
    label: str  # "fixed#2" for a sweep's second "fixed"; the variant otherwise
    stats: dict[str, Estimate | None]
    n_samples: int
    start_s: float | None = None  # a recording's segment: when it began and ended (session time)
    end_s: float | None = None
    sweep_ratio: str = ""  # a sweep's own relative speed and verdict, as it wrote them
    error: str = ""
    noise: str = ""  # "noisy: 40% of samples (host load)" when it was measured on a noisy machine

    @property
    def steps(self) -> Estimate | None:
        """Steps/s with its interval."""
        return self.stats.get("steps_per_s")

    @property
    def name(self) -> str:
        """ "sync_loss/fixed bs32"."""
        return f"{self.key[0]}/{self.label} bs{self.key[2] or '–'}"  # 0: not known (a job without a DataLoader)


@dataclass(frozen=True)
class Marker:
    """A change on a recording's timeline: when, and what (``variant: serial → pipelined``)."""

    time_s: float
    text: str


@dataclass
class Timeline:
    """A recording's throughput and GPU utilisation over time, with its changes."""

    time_s: list[float] = field(default_factory=list)
    steps_per_s: list[float] = field(default_factory=list)
    gpu_time_s: list[float] = field(default_factory=list)
    gpu_util_pct: list[float] = field(default_factory=list)
    markers: list[Marker] = field(default_factory=list)
    per_gpu_util: dict[int, list[tuple[float, float]]] = field(default_factory=dict)  # NVML index: (time s, %)


@dataclass(frozen=True)
class Phases:
    """A user's job's wall time by phase (seconds, in ``PHASES`` order) and goodput: its sidecar's,
    or (without one) from its ``phase`` rows and its samples' training seconds."""

    seconds: dict[str, float]
    wall_s: float
    goodput_pct: float | None

    @classmethod
    def of(cls, meta: dict[str, Any]) -> Phases | None:
        seconds, wall = meta.get("phases"), meta.get("wall_s")
        if not isinstance(seconds, dict) or not isinstance(wall, (int, float)):
            return None
        clean = {str(k): float(v) for k, v in seconds.items() if isinstance(v, (int, float)) and math.isfinite(v)}
        pct = meta.get("goodput_pct")
        return cls(clean, float(wall), float(pct) if isinstance(pct, (int, float)) else None)

    def line(self) -> str:
        """ "goodput 62.1% of 58.3 s: training 36.2 s · evaluation 9.8 s · …", as ``record`` says it."""
        return phases_line(self.seconds, self.wall_s, self.goodput_pct)


class PhaseRows:
    """The phases of a recording without its sidecar's: each ended ``phase`` row's seconds, the
    samples' training seconds, the wall time up to the last row."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.last_s = 0.0
        self.seen = False

    def add(self, msg: Message) -> None:
        self.last_s = max(self.last_s, msg.time_s)
        if isinstance(msg, Sample) and msg.train_s is not None:
            self.seconds[TRAINING] = self.seconds.get(TRAINING, 0.0) + msg.train_s
        elif isinstance(msg, Event) and (span := span_of(msg)) is not None and span.seconds is not None:
            seconds = span.seconds
            if math.isfinite(seconds) and seconds >= 0:
                self.seen = True
                self.seconds[msg.what] = self.seconds.get(msg.what, 0.0) + seconds

    def phases(self) -> Phases | None:
        if not self.seen or self.last_s <= 0:
            return None
        seconds = {k: self.seconds.get(k, 0.0) for k in PHASES if k != OTHER}
        seconds[OTHER] = max(0.0, self.last_s - sum(seconds.values()))
        wall = self.last_s - sum(seconds[kind] for kind in NOT_THE_JOBS)  # as the job's own account has it
        return Phases(seconds, self.last_s, 100.0 * min(seconds[TRAINING], wall) / wall if wall > 0 else None)


@dataclass(frozen=True)
class Run:
    """One input file of the report."""

    path: Path
    kind: str  # "recording" or "sweep"
    meta: dict[str, Any]
    configs: tuple[ConfigFigures, ...]
    timeline: Timeline | None = None  # recordings only
    ending: str = ""  # how a recording ended: its last event ("stopped", "crashed: ...")
    traces: tuple[tuple[float, str, str], ...] = ()  # profiler windows: (time s, configuration, figures → file)
    notes: tuple[str, ...] = ()  # what was ignored, for the user: "run.json ignored: …"
    phases: Phases | None = None  # a user's job: its wall time by phase, and goodput
    ranks: tuple[RankSample, ...] = ()  # a data-parallel run's ``rank`` rows: each rank's windows
    world: Event | None = None  # a torchrun job's: which run, node and ranks this recording saw

    @property
    def name(self) -> str:
        """The file name, for tables and legends (without control characters: it may be anything)."""
        return strip_controls(self.path.name)

    @property
    def shown_path(self) -> str:
        """The path as given, without control characters."""
        return strip_controls(str(self.path))

    def pooled(self, key: ConfigKey, label: str) -> Estimate | None:
        """Steps/s of one configuration over all its segments in this run, the mean weighted by
        samples, its interval counting how the segments differ (``stats.batch_means.pool_estimates``)."""
        parts = [c.steps for c in self.configs if c.key == key and c.label == label and c.steps is not None]
        if not parts:
            return None
        if len(parts) == 1:
            return parts[0]
        return pool_estimates(parts)


# -- reading ----------------------------------------------------------------------------------------
Rows = list[tuple[int, list[str]]]  # (line number, cells)
SWEEP_HEADERS = (list(SWEEP_COLUMNS), *(list(old) for old in OLD_SWEEP_COLUMNS))  # older: no noise, no knobs


def load_run(path: str | Path) -> Run:
    """Read one recording or sweep CSV and its metadata; ``ReportInputError`` when it is not one, whole."""
    p = Path(path)
    try:
        header, rows = read_table(p, check_header=lambda h: _check_header(p, h))
    except UnreadableCsv as exc:
        raise ReportInputError(str(exc)) from None
    sidecar = read_sidecar(p)
    if is_recording_header(header):
        return _recording(p, header, rows, sidecar)
    return _sweep(p, header, rows, sidecar)


def _check_header(p: Path, header: list[str]) -> None:
    if not is_recording_header(header) and header not in SWEEP_HEADERS:
        raise UnreadableCsv(f"{p} is not a gpudash CSV: its header is neither a recording's nor a sweep's")


def _notes(sidecar: Sidecar) -> tuple[str, ...]:
    return (sidecar.note,) if sidecar.note else ()


def _recording(p: Path, header: list[str], rows: Rows, sidecar: Sidecar) -> Run:
    """A ``--record`` CSV: its segments, timeline and ending."""
    tracker = SegmentTracker(max_segments=1_000_000)
    timeline = Timeline()
    ending = ""
    traces: list[tuple[float, str, str]] = []
    phase_rows = PhaseRows()
    ranks: list[RankSample] = []
    world: Event | None = None
    for number, msg in _messages(p, header, rows):
        phase_rows.add(msg)
        if isinstance(msg, RankSample):
            ranks.append(msg)
        elif isinstance(msg, GpuSample):
            tracker.on_gpu(msg)
            if msg.gpu_util_pct is not None:
                timeline.gpu_time_s.append(msg.time_s)
                timeline.gpu_util_pct.append(msg.gpu_util_pct)
            for reading in msg.per_gpu:
                if reading.gpu_util_pct is not None:
                    timeline.per_gpu_util.setdefault(reading.index, []).append((msg.time_s, reading.gpu_util_pct))
        elif isinstance(msg, Sample):
            if msg.workload is None or msg.variant is None or msg.batch_size is None:
                raise ReportInputError(f"{p}: line {number} is a sample without workload, variant or batch size")
            tracker.on_sample(msg)
            if msg.steps_per_s is not None and math.isfinite(msg.steps_per_s):
                timeline.time_s.append(msg.time_s)
                timeline.steps_per_s.append(msg.steps_per_s)
        elif isinstance(msg, Event):
            tracker.on_event(msg)
            if msg.kind == EventKind.CHANGED:
                timeline.markers.append(Marker(msg.time_s, f"{msg.what.replace('_', ' ')}: {msg.before} → {msg.after}"))
            elif msg.kind in (EventKind.STOPPED, EventKind.CRASHED):
                ending = msg.kind.value + (f": {msg.message}" if msg.message else "")
            elif msg.kind == EventKind.MEASURED and msg.what == WORLD:
                world = msg
            elif msg.kind == EventKind.MEASURED and msg.what == TRACE:
                current = tracker.current.label if tracker.current is not None else "?"
                traces.append((msg.time_s, current, msg.message))
    if not timeline.time_s:
        raise ReportInputError(f"{p} has no throughput samples (only its header and events)")
    configs = tuple(_segment_figures(seg) for seg in tracker.segments)
    phases = Phases.of(sidecar.data) or phase_rows.phases()
    notes = _notes(sidecar)
    return Run(
        p, "recording", sidecar.data, configs, timeline, ending, tuple(traces), notes, phases, tuple(ranks), world
    )


def _messages(p: Path, header: list[str], rows: Rows) -> list[tuple[int, Message]]:
    """Each row's messages, with its line number; a bad cell is a ``ReportInputError``."""
    parser = RowParser(header)
    out: list[tuple[int, Message]] = []
    for number, cells in rows:
        try:
            out.extend((number, msg) for msg in parser.messages(cells))
        except (ValueError, TypeError, ArithmeticError) as exc:
            raise ReportInputError(f"{p}: line {number}: {clip(str(exc))}") from None
    return out


def _segment_figures(seg: Segment) -> ConfigFigures:
    """A segment's figures after warm-up, as the dashboard and the CSV's summary rows give them."""
    stats: dict[str, Estimate | None] = {k: seg.estimate(k) for k in FIGURE_KEYS}
    steps = stats["steps_per_s"]
    label = seg.key[1] if seg.key[3] == "none" else f"{seg.key[1]} [{seg.key[3]}]"
    n = steps.n_samples if steps else 0
    return ConfigFigures(seg.key, label, stats, n, seg.start_s, seg.end_s, noise=seg.noise.note())


def _sweep(p: Path, header: list[str], rows: Rows, sidecar: Sidecar) -> Run:
    """A ``sweep.csv``: one ``ConfigFigures`` per summary row."""
    configs = []
    for number, cells in rows:
        row = dict(zip(header, cells, strict=False))
        if row["row_kind"] == "summary":
            try:
                configs.append(_summary_figures(row))
            except (ValueError, ArithmeticError) as exc:
                raise ReportInputError(f"{p}: line {number}: {clip(str(exc))}") from None
    if not configs:
        raise ReportInputError(f"{p} has no summary rows (the sweep did not finish a family)")
    return Run(p, "sweep", sidecar.data, tuple(configs), notes=_notes(sidecar))


def _summary_figures(row: dict[str, str]) -> ConfigFigures:
    """A sweep summary row, read as the sweep reads its own (``summary_from_row``)."""
    s = summary_from_row(row, 0, None)
    c = s.comparison
    ratio = f"{fmt_ratio(c)} {c.verdict}" if c is not None else ("1.00× (baseline)" if row["ratio"] else "")
    key: ConfigKey = (s.config.family, s.config.variant, s.config.batch_size, s.config.knobs)
    return ConfigFigures(
        key, s.config.label, dict(s.stats), s.n_samples, sweep_ratio=ratio, error=s.error, noise=s.noise
    )
