"""The CSV format of a recorded run: one list of columns, and the conversions both ways.

One header row; one ``sample`` row per tick (the child's latest sample joined with the
latest NVML sample); one ``event`` row per event, and a ``summary`` row with each
configuration's statistics when it ends (``summary_row``; readers of messages skip it). Units are in the column names; an empty
cell means "not available". ``pandas.read_csv(path)`` loads it as is. Written by the
recorder and the dashboard's recording; read back by ``gpudash replay``.
"""

from __future__ import annotations

import csv
import functools
import io
import math
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TextIO

from gpudash.metrics import (ALLOCATOR_KEYS, BY_KEY, NVML_KEYS, PER_GPU_KEYS, RANK_KEYS, WORKLOAD_KEYS, Origin,
                             keys)
from gpudash.protocol import Event, EventKind, GpuReading, GpuSample, Message, Sample
from gpudash.segments import Segment

CONFIG_COLUMNS = ("workload", "variant", "batch_size")  # what ran, on every row
SAMPLE_COLUMNS = [*CONFIG_COLUMNS, *WORKLOAD_KEYS]  # the fields of a Sample, in CSV order
GPU_COLUMNS = list(NVML_KEYS)  # the fields of a GpuSample
DERIVED_COLUMNS = list(keys(Origin.DERIVED))
EVENT_COLUMNS = ["event_kind", "event_what", "event_before", "event_after", "event_message"]
# Added after 0.1, at the end so 0.1's columns keep their places: the knob settings on every
# row ("amp=bf16,cuda_graph=on", "none"); a 0.1 file without it reads as "none".
KNOBS_COLUMN = "knobs"
ROW_KINDS = ("sample", "event", "summary")  # the row_kind column's values
MAX_TIME_S = 1e9  # a row's time_s (seconds since the run began) is below this: 31 years
# Added after the knobs column: a data-parallel run's ranks (world_size, slowest_rank,
# slowest_rank_step_ms); a file without them reads as one process.
RANK_COLUMNS = list(RANK_KEYS)
# Added after the ranks' columns: the workload's CUDA caching allocator (cuda_allocated_mib,
# cuda_reserved_mib); empty on the CPU and in a file without them.
ALLOCATOR_COLUMNS = list(ALLOCATOR_KEYS)
LATER_SAMPLE_COLUMNS = [*RANK_COLUMNS, *ALLOCATOR_COLUMNS]  # Sample fields after the knobs column
COLUMNS_0_1 = ["row_kind", "time_s", *SAMPLE_COLUMNS, *GPU_COLUMNS, *DERIVED_COLUMNS, *EVENT_COLUMNS]
COLUMNS = [*COLUMNS_0_1, KNOBS_COLUMN, *LATER_SAMPLE_COLUMNS]


def is_recording_header(header: list[str]) -> bool:
    """A recording's header: this version's, or an earlier one's (0.1's starts the same way)."""
    return header[: len(COLUMNS_0_1)] == COLUMNS_0_1


def missing_columns(header: list[str]) -> list[str]:
    """The columns every recording has (0.1's too) that ``header`` lacks, in the format's order."""
    present = set(header)
    return [c for c in COLUMNS_0_1 if c not in present]


# Added after 0.2, after every other column: for each GPU watched (``GpuInfo.sampled``), in its
# order, its per-GPU metrics (``PER_GPU_KEYS``): gpu0_util_pct, gpu0_mem_used_mib, gpu0_power_w,
# gpu0_sm_clock_mhz, gpu0_temp_c, gpu1_… A recording without them has no per-GPU readings.
_PER_GPU_COLUMN = re.compile(r"gpu(0|[1-9]\d*)_(\w+)")
_PER_GPU_SUFFIXES = tuple(key.removeprefix("gpu_") for key in PER_GPU_KEYS)


def per_gpu_columns(gpus: Sequence[int]) -> list[str]:
    """The per-GPU columns of a recording that watched ``gpus`` (NVML indexes, in their order):
    GPU 2's ``gpu_util_pct`` is ``gpu2_util_pct``."""
    return [f"gpu{i}_{suffix}" for i in gpus for suffix in _PER_GPU_SUFFIXES]


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
    return tuple(index for index, suffixes in found.items() if suffixes.issuperset(_PER_GPU_SUFFIXES))


def per_gpu_cells(gpu: GpuSample | None, gpus: Sequence[int]) -> list[str]:
    """A row's per-GPU cells: ``gpu``'s readings of ``gpus``; empty where it has none (and for
    rows without an NVML sample: events, summaries)."""
    readings = {r.index: r for r in gpu.per_gpu} if gpu is not None else {}
    return [_cell(getattr(readings[i], k) if i in readings else None, k) for i in gpus for k in PER_GPU_KEYS]


_KIND = {"batch_size": int, "workload": str, "variant": str, KNOBS_COLUMN: str,
         **{k: m.kind for k, m in BY_KEY.items()}}
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
    if gpu is not None:
        values.update({c: getattr(gpu, c) for c in GPU_COLUMNS})
    values.update(derived or {})
    return [_cell(values.get(c), c) for c in COLUMNS]


def event_row(event: Event, current: Sample | None = None) -> list[str]:
    """An event row; the configuration columns say what runs *after* the event, when known."""
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
        values.update(workload=current.workload, variant=current.variant, batch_size=current.batch_size,
                      knobs=current.knobs)
    return [_cell(values.get(c), c) for c in COLUMNS]


def summary_row(segment: Segment, time_s: float) -> list[str]:
    """A ``summary`` row (its own ``row_kind``: sample-row averages stay clean) for a
    configuration that ended: its means in the metric columns,
    the 95% interval of steps/s in ``event_before`` (low) and ``event_after`` (high), and the
    whole summary as one line in ``event_message``."""
    values: dict[str, object] = {"row_kind": "summary", "time_s": time_s, "event_kind": EventKind.SUMMARY.value,
                                 "event_what": "steps_per_s", "event_message": segment.summary()}
    values.update(zip((*CONFIG_COLUMNS, KNOBS_COLUMN), segment.key))
    for key in (*WORKLOAD_KEYS, *NVML_KEYS, *DERIVED_COLUMNS):
        if BY_KEY[key].mean is not None:
            values[key] = segment.mean(key)
    e = segment.estimate("steps_per_s")
    if e is not None and e.has_interval:
        values["event_before"], values["event_after"] = e.low, e.high
    return [_cell(values.get(c), c) for c in COLUMNS]


def header(gpus: Sequence[int] = ()) -> list[str]:
    """A recording's header: ``COLUMNS``, then the per-GPU columns of ``gpus``."""
    return [*COLUMNS, *per_gpu_columns(gpus)]


def format_row(row: list[str]) -> str:
    """One CSV line (with its newline), so a writer can emit and flush it whole."""
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow(row)
    return buf.getvalue()


def _as_text(text: str) -> str | None:
    return text or None


def _as_int(text: str) -> int | None:
    return int(float(text)) if text else None


def _as_float(text: str) -> float | None:
    """A number; one that is not finite is "not available" (None), like an empty cell."""
    if not text:
        return None
    value = float(text)
    return value if math.isfinite(value) else None


_CONVERT = {str: _as_text, int: _as_int, float: _as_float}


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
        self._events = [(f, at.get(c)) for f, c in zip(("kind", "what", "before", "after", "message"), EVENT_COLUMNS)]

        def columns(names: Sequence[str]) -> list[tuple[str, int | None, Callable[[str], object]]]:
            return [(c, at.get(c), _CONVERT[_KIND.get(c, float)]) for c in names]

        self._gpu, self._sample = columns(GPU_COLUMNS), columns(SAMPLE_COLUMNS)
        self._later = [(c, i, conv) for c, i, conv in columns(LATER_SAMPLE_COLUMNS) if i is not None]
        per_gpu_convs = [_CONVERT[_KIND.get(k, float)] for k in PER_GPU_KEYS]
        self._per_gpu = [(index, per_gpu_convs, [at[c] for c in per_gpu_columns([index])])
                         for index in per_gpu_indexes(header)]

    def messages(self, cells: Sequence[str]) -> list[Message]:
        """A row's messages: an event; for a sample row its NVML sample (when it has one) and
        then the workload's, the order in which the recorder saw them; none for a summary row."""
        kind, t = cells[self._kind], _time(cells[self._t])
        if kind == "event":
            kw = {f: cells[i] if i is not None else "" for f, i in self._events}
            return [Event(time_s=t, **kw)]  # type: ignore[arg-type]
        if kind != "sample":
            return []
        out: list[Message] = []
        g = {c: conv(cells[i]) if i is not None else None for c, i, conv in self._gpu}
        per_gpu = tuple(GpuReading(index, **{k: conv(cells[i]) for k, conv, i in zip(PER_GPU_KEYS, convs, at)})
                        for index, convs, at in self._per_gpu)  # type: ignore[arg-type]
        if any(v is not None for v in g.values()) or any(r.answered for r in per_gpu):
            out.append(GpuSample(time_s=t, per_gpu=per_gpu, **g))  # type: ignore[arg-type]
        s = {c: conv(cells[i]) if i is not None else None for c, i, conv in self._sample}
        s.update({c: value for c, i, conv in self._later if (value := conv(cells[i])) is not None})
        knobs = cells[self._knobs] if self._knobs is not None else ""
        out.append(Sample(time_s=t, knobs=knobs or "none", **s))  # type: ignore[arg-type]
        return out


def parse_rows(rows: Iterable[dict[str, str]]) -> Iterator[Message]:
    """Turn CSV rows (as ``csv.DictReader`` gives them) back into messages, oldest first."""
    parsers: dict[tuple[str, ...], RowParser] = {}
    for row in rows:
        header = tuple(row)
        parser = parsers.get(header) or parsers.setdefault(header, RowParser(header))
        yield from parser.messages(list(row.values()))


def read_messages(stream: TextIO) -> Iterator[Message]:
    """Messages of a whole CSV file (header included)."""
    yield from parse_rows(csv.DictReader(stream))
