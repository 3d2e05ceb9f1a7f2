"""The CSV format of a recorded run: one list of columns, and the conversions both ways.

One header row; one ``sample`` row per tick (the child's latest sample joined with the latest NVML
sample); one ``event`` row per event, and a ``summary`` row with each configuration's statistics when
it ends (``summary_row``; readers of messages skip it); a recording of NVML alone (``gpudash watch
--record``) has a ``gpu`` row per tick instead of samples. Units are in the column names; an empty cell
means "not available". ``pandas.read_csv(path)`` loads it as is. Written by the recorder and the
dashboard's recording; read back by ``gpudash replay`` and ``gpudash report`` through one reader,
``CsvRecords``, which treats the file as hostile: records are bounded (``MAX_RECORD``; fields by
``csv``'s field limit), control characters are stripped as the text is read, and a bad record is
handed to its caller's policy (replay skips and counts it; report and ``read_table`` refuse it).
"""

from __future__ import annotations

import csv
import functools
import io
import math
import os
import re
from collections.abc import Callable, Iterator, Sequence
from typing import TextIO

from gpudash.core.metrics import (
    ALLOCATOR_KEYS,
    BY_KEY,
    GPM_KEYS,
    MODEL_KEYS,
    NVML_KEYS,
    PER_GPU_BASE_KEYS,
    PER_GPU_KEYS,
    RANK_KEYS,
    WORKLOAD_KEYS,
    Origin,
    keys,
)
from gpudash.core.protocol import Event, EventKind, GpuReading, GpuSample, Message, Sample
from gpudash.core.running import Running
from gpudash.core.textfmt import strip_controls
from gpudash.stats.segments import Segment

CONFIG_COLUMNS = ("workload", "variant", "batch_size")  # what ran, on every row
SAMPLE_COLUMNS = [*CONFIG_COLUMNS, *WORKLOAD_KEYS]  # the fields of a Sample, in CSV order
GPU_COLUMNS = list(NVML_KEYS)  # the fields of a GpuSample
DERIVED_COLUMNS = list(keys(Origin.DERIVED))
EVENT_COLUMNS = ["event_kind", "event_what", "event_before", "event_after", "event_message"]
# Added after 0.1, at the end so 0.1's columns keep their places: the knob settings on every
# row ("amp=bf16,cuda_graph=on", "none"); a 0.1 file without it reads as "none".
KNOBS_COLUMN = "knobs"
ROW_KINDS = ("sample", "event", "summary", "gpu")  # the row_kind column's values (gpu: an NVML tick alone)
MAX_TIME_S = 1e9  # a row's time_s (seconds since the run began) is below this: 31 years
# Added after the knobs column: a data-parallel run's ranks (world_size, slowest_rank,
# slowest_rank_step_ms); a file without them reads as one process.
RANK_COLUMNS = list(RANK_KEYS)
# Added after the ranks' columns: the workload's CUDA caching allocator (cuda_allocated_mib,
# cuda_reserved_mib); empty on the CPU and in a file without them.
ALLOCATOR_COLUMNS = list(ALLOCATOR_KEYS)
LATER_SAMPLE_COLUMNS = [*RANK_COLUMNS, *ALLOCATOR_COLUMNS]  # Sample fields after the knobs column
# Added after the allocator's columns: a summary row's 95% interval of the mean of steps/s (empty on
# other rows, or too short for one); a file without them carried it in event_before/after.
CI_COLUMNS = ["ci_low", "ci_high"]
COLUMNS_0_1 = ["row_kind", "time_s", *SAMPLE_COLUMNS, *GPU_COLUMNS, *DERIVED_COLUMNS, *EVENT_COLUMNS]
# Added after the interval's columns: what made the machine noisy while a sample was measured
# (``Sample.noise``; empty: quiet); on a summary row the share of noisy samples and why.
NOISE_COLUMN = "noise"
# Added after the noise (and NVML's per-GPU columns): GPM's figures of the tick, then the model's
# FLOPs a step, TFLOP/s and MFU; empty where not known and in a file without them.
GPM_COLUMNS = list(GPM_KEYS)
MODEL_COLUMNS = list(MODEL_KEYS)
# Last, after GPM's per-GPU ones: a job's training seconds (``Sample.train_s``; empty: a family's, an old file)
TRAINING_COLUMNS = list(keys(Origin.TRAINING))
COLUMNS = [*COLUMNS_0_1, KNOBS_COLUMN, *LATER_SAMPLE_COLUMNS, *CI_COLUMNS, NOISE_COLUMN, *GPM_COLUMNS, *MODEL_COLUMNS]
COLUMNS += TRAINING_COLUMNS


def is_recording_header(header: list[str]) -> bool:
    """A recording's header: this version's, or an earlier one's (0.1's starts the same way)."""
    return header[: len(COLUMNS_0_1)] == COLUMNS_0_1


def missing_columns(header: list[str]) -> list[str]:
    """The columns every recording has (0.1's too) that ``header`` lacks, in the format's order."""
    present = set(header)
    return [c for c in COLUMNS_0_1 if c not in present]


# Added after 0.2, after the noise column: for each GPU watched (``GpuInfo.sampled``), in its order,
# NVML's per-GPU metrics (``PER_GPU_BASE_KEYS``): gpu0_util_pct, …, gpu0_temp_c, gpu1_…; at the very
# end (added with GPM) each GPU's GPM ones: gpu0_sm_active_pct, …, gpu1_… A GPU is read when it has
# its first five; a recording without the GPM ones reads those as empty.
_PER_GPU_COLUMN = re.compile(r"gpu(0|[1-9]\d*)_(\w+)")
_PER_GPU_BASE_SUFFIXES = tuple(key.removeprefix("gpu_") for key in PER_GPU_BASE_KEYS)
_PER_GPU_GROUPS = (PER_GPU_BASE_KEYS, tuple(k for k in PER_GPU_KEYS if k not in PER_GPU_BASE_KEYS))


def per_gpu_column(index: int, key: str) -> str:
    """GPU ``index``'s column of the per-GPU metric ``key``: GPU 2's ``gpu_util_pct`` is ``gpu2_util_pct``."""
    return f"gpu{index}_{key.removeprefix('gpu_')}"


def per_gpu_columns(gpus: Sequence[int], group: int | None = None) -> list[str]:
    """The per-GPU columns of ``gpus`` (NVML indexes, in their order): NVML's (``group`` 0), GPM's (1), or both."""
    groups = _PER_GPU_GROUPS if group is None else (_PER_GPU_GROUPS[group],)
    return [per_gpu_column(i, k) for keys in groups for i in gpus for k in keys]


def per_gpu_indexes(header: Sequence[str]) -> list[int]:
    """The GPUs a header has every per-GPU column of, in its order."""
    return list(_per_gpu_indexes(tuple(header)))


@functools.lru_cache(maxsize=16)  # a reader that parses row by row asks again for the same header
def _per_gpu_indexes(header: tuple[str, ...]) -> tuple[int, ...]:
    found: dict[int, set[str]] = {}
    for column in header:
        m = _PER_GPU_COLUMN.fullmatch(column) if column.startswith("gpu") else None
        if m:
            found.setdefault(int(m.group(1)), set()).add(m.group(2))
    return tuple(index for index, suffixes in found.items() if suffixes.issuperset(_PER_GPU_BASE_SUFFIXES))


def per_gpu_cells(gpu: GpuSample | None, gpus: Sequence[int], group: int | None = None) -> list[str]:
    """A row's per-GPU cells (``gpu``'s readings of ``gpus``; empty where none), ``group`` as ``per_gpu_columns``'."""
    readings = {r.index: r for r in gpu.per_gpu} if gpu is not None else {}
    groups = _PER_GPU_GROUPS if group is None else (_PER_GPU_GROUPS[group],)
    return [_cell(getattr(readings[i], k) if i in readings else None, k) for keys in groups for i in gpus for k in keys]


_KIND = {
    "batch_size": int,
    "workload": str,
    "variant": str,
    KNOBS_COLUMN: str,
    NOISE_COLUMN: str,
    **{k: m.kind for k, m in BY_KEY.items()},
}
_DECIMALS = {"time_s": 3, **{k: m.csv_decimals for k, m in BY_KEY.items() if m.csv_decimals is not None}}


def _cell(value: object, column: str = "") -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        decimals = _DECIMALS.get(column)
        return f"{value:.{decimals}f}" if decimals is not None else f"{value:.6g}"
    return str(value)


def sample_row(sample: Sample, gpu: GpuSample | None, derived: dict[str, float | None] | None = None) -> list[str]:
    """A sample row: the sample, the newest NVML sample, and the derived metrics (J/step)."""
    values: dict[str, object] = {"row_kind": "sample", "time_s": sample.time_s}
    values.update({c: getattr(sample, c) for c in SAMPLE_COLUMNS})
    values[KNOBS_COLUMN] = sample.knobs
    values.update({c: getattr(sample, c) for c in LATER_SAMPLE_COLUMNS})
    values[NOISE_COLUMN] = sample.noise
    values.update({c: getattr(sample, c) for c in (*MODEL_COLUMNS, *TRAINING_COLUMNS)})
    if gpu is not None:
        values.update({c: getattr(gpu, c) for c in (*GPU_COLUMNS, *GPM_COLUMNS)})
    values.update(derived or {})
    return [_cell(values.get(c), c) for c in COLUMNS]


def gpu_row(gpu: GpuSample) -> list[str]:
    """A ``gpu`` row: an NVML tick on its own, with no workload's sample to join (``gpudash watch
    --record``); the per-GPU cells follow as on a sample row."""
    values: dict[str, object] = {"row_kind": "gpu", "time_s": gpu.time_s}
    values.update({c: getattr(gpu, c) for c in (*GPU_COLUMNS, *GPM_COLUMNS)})
    return [_cell(values.get(c), c) for c in COLUMNS]


def event_row(event: Event, current: Running | None = None) -> list[str]:
    """An event row; the configuration columns say what runs *after* the event, when known
    (``current``: the run's state after it)."""
    values: dict[str, object] = {
        "row_kind": "event",
        "time_s": event.time_s,
        "event_kind": event.kind.value,
        "event_what": event.what,
        "event_before": event.before,
        "event_after": event.after,
        "event_message": event.message,
    }
    if current is not None:
        values.update(
            workload=current.workload, variant=current.variant, batch_size=current.batch_size, knobs=current.knobs
        )
    return [_cell(values.get(c), c) for c in COLUMNS]


def summary_row(segment: Segment, time_s: float) -> list[str]:
    """A ``summary`` row (its own ``row_kind``: sample-row averages stay clean) for a
    configuration that ended: its means in the metric columns,
    the 95% interval of the mean of steps/s in ``ci_low`` and ``ci_high``, and the
    whole summary as one line in ``event_message``."""
    values: dict[str, object] = {
        "row_kind": "summary",
        "time_s": time_s,
        "event_kind": EventKind.SUMMARY.value,
        "event_what": "steps_per_s",
        "event_message": segment.summary(),
        NOISE_COLUMN: segment.noise.note(),
    }
    values.update(zip((*CONFIG_COLUMNS, KNOBS_COLUMN), segment.key, strict=False))
    for key in (*WORKLOAD_KEYS, *NVML_KEYS, *DERIVED_COLUMNS, *GPM_COLUMNS, *MODEL_COLUMNS):
        if BY_KEY[key].mean is not None:
            values[key] = segment.mean(key)
    e = segment.estimate("steps_per_s")
    if e is not None and e.has_interval:
        values["ci_low"], values["ci_high"] = e.low, e.high
    return [_cell(values.get(c), c) for c in COLUMNS]


_LATEST = len(COLUMNS) - len(TRAINING_COLUMNS)  # the columns before the job's training seconds
_EARLIER = _LATEST - len(GPM_COLUMNS) - len(MODEL_COLUMNS)  # the columns before GPM's and the model's


def header(gpus: Sequence[int] = ()) -> list[str]:
    """A recording's header (every earlier version's columns in their places, ``full_row``)."""
    return full_row(COLUMNS, per_gpu_columns(gpus, 0), per_gpu_columns(gpus, 1))


def full_row(cells: Sequence[str], nvml_cells: Sequence[str], gpm_cells: Sequence[str]) -> list[str]:
    """``COLUMNS`` up to the noise, NVML's per-GPU cells, GPM's and the model's, GPM's per-GPU cells."""
    return [*cells[:_EARLIER], *nvml_cells, *cells[_EARLIER:_LATEST], *gpm_cells, *cells[_LATEST:]]


def row_cells(cells: Sequence[str], gpu: GpuSample | None, gpus: Sequence[int]) -> list[str]:
    """A row of ``COLUMNS`` cells as written, with ``gpu``'s per-GPU readings of ``gpus``."""
    return full_row(cells, per_gpu_cells(gpu, gpus, 0), per_gpu_cells(gpu, gpus, 1))


def format_row(row: list[str]) -> str:
    """One CSV line (with its newline), so a writer can emit and flush it whole."""
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow(row)
    return buf.getvalue()


REQUIRED_SAMPLE_COLUMNS = ("steps", "samples", "interval_s")  # a sample row without one is not read


def _as_float(text: str) -> float | None:
    """A number; one that is not finite is "not available" (None), like an empty cell."""
    value = float(text) if text else math.nan
    return value if math.isfinite(value) else None


_CONVERT = {str: lambda text: text or None, int: lambda text: int(float(text)) if text else None, float: _as_float}


def _time(text: str) -> float:
    """A row's time: seconds since the run began, finite and below ``MAX_TIME_S``."""
    t = float(text)
    if not 0 <= t < MAX_TIME_S:
        raise ValueError(f"time_s {text!r} is outside 0..{MAX_TIME_S:g}")
    return t


class RowParser:
    """Rows of one header (lists of cells) back into messages; the header's columns are looked
    up once. A cell that is not of its column's kind raises ValueError or OverflowError."""

    def __init__(self, header: Sequence[str]) -> None:
        at = {c: i for i, c in enumerate(header)}
        self._kind, self._t = at["row_kind"], at["time_s"]
        self._knobs = at.get(KNOBS_COLUMN)
        self._noise = at.get(NOISE_COLUMN)
        # a summary row's interval: its own columns, or (a file from before them) the event's
        ci = [at.get(c) for c in CI_COLUMNS]
        self._ci = ci if None not in ci else [at.get("event_before"), at.get("event_after")]
        self._events = [
            (f, at.get(c)) for f, c in zip(("kind", "what", "before", "after", "message"), EVENT_COLUMNS, strict=False)
        ]

        def columns(names: Sequence[str]) -> list[tuple[str, int | None, Callable[[str], object]]]:
            return [(c, at.get(c), _CONVERT[_KIND.get(c, float)]) for c in names]

        self._gpu, self._sample = columns([*GPU_COLUMNS, *GPM_COLUMNS]), columns(SAMPLE_COLUMNS)
        later = [*LATER_SAMPLE_COLUMNS, *MODEL_COLUMNS, *TRAINING_COLUMNS]
        self._later = [(c, i, conv) for c, i, conv in columns(later) if i is not None]
        self._per_gpu = [
            (index, [(k, at.get(per_gpu_column(index, k)), _CONVERT[_KIND.get(k, float)]) for k in PER_GPU_KEYS])
            for index in per_gpu_indexes(header)
        ]

    def messages(self, cells: Sequence[str]) -> list[Message]:
        """A row's messages: an event; for a sample row its NVML sample (when it has one) and
        then the workload's, the order in which the recorder saw them; none for a summary row."""
        kind, t = cells[self._kind], _time(cells[self._t])
        if kind == "event":
            kw = {f: cells[i] if i is not None else "" for f, i in self._events}
            return [Event(time_s=t, **kw)]  # type: ignore[arg-type]  # fields by the columns' names
        if kind == "gpu":
            return self._gpu_sample(cells, t)
        if kind != "sample":
            return []
        out: list[Message] = self._gpu_sample(cells, t)
        s = {c: conv(cells[i]) if i is not None else None for c, i, conv in self._sample}
        missing = next((c for c in REQUIRED_SAMPLE_COLUMNS if s.get(c) is None), None)
        if missing is not None:  # what a throughput's time and energy are computed from
            raise ValueError(f"{missing} is empty or not a finite number")
        s.update({c: value for c, i, conv in self._later if (value := conv(cells[i])) is not None})
        knobs = cells[self._knobs] if self._knobs is not None else ""
        noise = cells[self._noise] if self._noise is not None else ""
        out.append(Sample(time_s=t, knobs=knobs or "none", noise=noise, **s))  # type: ignore[arg-type]  # fields by the columns' names
        return out

    def _gpu_sample(self, cells: Sequence[str], t: float) -> list[Message]:
        """A row's NVML sample: [it], or [] when the row has none."""
        g = {c: conv(cells[i]) if i is not None else None for c, i, conv in self._gpu}
        per_gpu = tuple(
            GpuReading(index, **{k: conv(cells[i]) if i is not None else None for k, i, conv in read})
            for index, read in self._per_gpu
        )
        if any(v is not None for v in g.values()) or any(r.answered for r in per_gpu):
            return [GpuSample(time_s=t, per_gpu=per_gpu, **g)]  # type: ignore[arg-type]  # fields by the columns' names
        return []

    def interval(self, cells: Sequence[str]) -> tuple[float, float] | None:
        """A summary row's 95% interval of steps/s, (low, high): its ``ci_low``/``ci_high``, or in a
        file without those columns its ``event_before``/``event_after``; None for other rows and
        for a summary without one (empty cells, a number that is not finite, low above high)."""
        if cells[self._kind] != "summary":
            return None
        low, high = (_as_float(cells[i]) if i is not None else None for i in self._ci)
        if low is None or high is None or low > high:
            return None
        return low, high


# -- reading: one bounded reader for every CSV gpudash reads back -------------------------------------
CHUNK = 256 << 10  # characters read (and parsed) at a time: about 1 000 rows
MAX_RECORD = 1 << 20  # a record longer than this (or a quote never closed) is not a row: bad
BadRecord = Callable[[int, str], None]  # what a reader does with a bad record: (line, why: "is longer …")


class UnreadableCsv(ValueError):
    """A CSV file ``read_table`` refuses: the message is one line naming the file (and the line)."""


def open_csv(path: str | os.PathLike[str]) -> TextIO:
    """A CSV file opened as every reader here opens one: UTF-8 (a byte that is not reads as
    U+FFFD), line endings as they are (``csv`` needs them)."""
    return open(path, encoding="utf-8", errors="replace", newline="")


def _complete_prefix(text: str) -> int:
    """The length of the longest prefix of ``text`` made of whole CSV records: it ends with a
    newline outside quotes (0: no record is complete yet). Linear in ``len(text)``."""
    last = text.rfind("\n")
    if last < 0:
        return 0
    if text.count('"', 0, last) % 2 == 0:  # the common case: no quote open at the last newline
        return last + 1
    end, pos, odd = 0, 0, False
    while (nl := text.find("\n", pos, last + 1)) >= 0:
        odd ^= bool(text.count('"', pos, nl) % 2)
        pos = nl + 1
        if not odd:
            end = pos
    return end


def _blank(cells: list[str]) -> bool:
    """An empty line (or one of spaces): no record at all."""
    return not cells or (len(cells) == 1 and not cells[0].strip())


class CsvRecords:
    """The records of an open CSV file (``open_csv``), read incrementally as a hostile file.

    ``read()`` reads a chunk and returns the records it completed as (line number, cells), parsed
    as they are iterated (one at a time: a chunk's thousand rows are never all held as lists);
    a record still being written (no newline yet, or an open quote) is kept back until it is
    whole. Control
    characters are stripped as the text is read (``strip_controls``; a quoted cell keeps its
    line feeds), so no cell can carry an escape sequence. A record over ``MAX_RECORD``
    characters, or with a field over ``csv``'s field limit, is handed to ``on_bad`` (which may
    raise) and skipped; blank lines are skipped."""

    def __init__(self, f: TextIO, on_bad: BadRecord) -> None:
        self._f = f
        self._on_bad = on_bad
        self._pending = ""  # text after the last whole record
        self._skipping = False  # dropping an overlong record until its newline
        self._lines = 0  # lines before ``_pending``
        self.at_end = False  # the last read reached the end of the file (as it was then)
        self.chars_read = 0  # progress only

    @property
    def has_pending(self) -> bool:
        """Text after the last whole record: a row without its newline (yet)."""
        return bool(self._pending.strip())

    def unfinished(self) -> str | None:
        """Why the text after the last whole record is not one, at the end of a file ("line 9
        has no newline …"); None when there is none."""
        if not self.has_pending:
            return None
        if "\n" in self._pending:
            return f"line {self._lines + 1} opens a quote it never closes"
        return f"line {self._lines + 1} has no newline (truncated while being written?)"

    def read(self, size: int = CHUNK) -> Iterator[tuple[int, list[str]]]:
        """Read up to ``size`` more characters (now); the records they completed (as iterated)."""
        chunk = self._f.read(size)
        self.at_end = len(chunk) < size
        self.chars_read += len(chunk)
        self._pending += strip_controls(chunk, keep_newlines=True)
        if self._skipping and not self._skip_rest():
            return iter(())
        cut = _complete_prefix(self._pending)
        if cut == 0 and len(self._pending) > MAX_RECORD:  # no end in sight (or a stray quote): one bad record
            line = self._lines + 1
            self._lines += self._pending.count("\n")
            self._pending, self._skipping = "", True
            self._on_bad(line, f"is longer than {MAX_RECORD >> 20} MiB")
            return iter(())
        done, self._pending = self._pending[:cut], self._pending[cut:]
        return self._parse(done)

    def finish(self) -> Iterator[tuple[int, list[str]]]:
        """The whole file is read: a last record without its newline is complete after all."""
        rest, self._pending = self._pending, ""
        return self._parse(rest + "\n") if rest.strip() and not self._skipping else iter(())

    def _skip_rest(self) -> bool:
        """Drop the rest of an overlong record, up to its newline; whether that was found."""
        nl = self._pending.find("\n")
        if nl < 0:
            self._pending = ""
            return False
        self._pending, self._skipping = self._pending[nl + 1 :], False
        self._lines += 1
        return True

    def _parse(self, text: str) -> Iterator[tuple[int, list[str]]]:
        """The records of ``text`` (whole records), counted in lines now, parsed as iterated."""
        first, self._lines = self._lines + 1, self._lines + text.count("\n")
        return self._records(csv.reader(io.StringIO(text)), first)

    def _records(self, rows: Iterator[list[str]], first: int) -> Iterator[tuple[int, list[str]]]:
        while True:
            line = first + rows.line_num  # type: ignore[attr-defined]  # a csv.reader, typed as its rows
            try:
                cells = next(rows)
            except StopIteration:
                return
            except csv.Error as exc:  # a field over csv's field limit, mostly
                self._on_bad(line, f"is not CSV: {exc}")
                continue
            if not _blank(cells):
                yield line, cells


def _open_table(path: str | os.PathLike[str]) -> TextIO:
    try:
        return open_csv(path)
    except FileNotFoundError:
        raise UnreadableCsv(f"no such file: {path}") from None
    except IsADirectoryError:
        raise UnreadableCsv(f"{path} is a directory, not a CSV") from None
    except OSError as exc:
        raise UnreadableCsv(f"cannot read {path}: {exc.strerror or exc}") from None


def read_table(
    path: str | os.PathLike[str], check_header: Callable[[list[str]], None] | None = None
) -> tuple[list[str], list[tuple[int, list[str]]]]:
    """A whole CSV file, strictly: its header and each record after it as (line number, cells),
    each with as many cells as the header. Raises ``UnreadableCsv`` for the first thing wrong;
    ``check_header`` may refuse the header before the rest is read."""

    def refuse(line: int, why: str) -> None:
        raise UnreadableCsv(f"{path}: line {line} {why}")

    header: list[str] | None = None
    rows: list[tuple[int, list[str]]] = []
    with _open_table(path) as f:
        records = CsvRecords(f, refuse)
        while not records.at_end:
            for line, cells in records.read():
                if header is None:
                    header = cells
                    if check_header is not None:
                        check_header(header)
                elif len(cells) != len(header):
                    raise UnreadableCsv(f"{path}: line {line} has {len(cells)} of {len(header)} fields (truncated?)")
                else:
                    rows.append((line, cells))
        unfinished = records.unfinished()
        if unfinished:
            raise UnreadableCsv(f"{path}: {unfinished}")
    if header is None:
        raise UnreadableCsv(f"{path} is empty")
    return header, rows
