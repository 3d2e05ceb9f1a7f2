"""The CSV format of a recorded run: one list of columns, and the conversions both ways.

One header row; one ``sample`` row per tick (the child's latest sample joined with the
latest NVML sample); one ``event`` row per event, and a ``summary`` row with each
configuration's statistics when it ends (``summary_row``; readers of messages skip it). Units are in the column names; an empty
cell means "not available". ``pandas.read_csv(path)`` loads it as is. Written by the
recorder and the dashboard's recording; read back by ``gpudash replay``.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Iterator
from typing import TextIO

from gpudash.metrics import BY_KEY, NVML_KEYS, WORKLOAD_KEYS, Origin, keys
from gpudash.protocol import Event, EventKind, GpuSample, Message, Sample
from gpudash.segments import Segment

CONFIG_COLUMNS = ("workload", "variant", "batch_size")  # what ran, on every row
SAMPLE_COLUMNS = [*CONFIG_COLUMNS, *WORKLOAD_KEYS]  # the fields of a Sample, in CSV order
GPU_COLUMNS = list(NVML_KEYS)  # the fields of a GpuSample
DERIVED_COLUMNS = list(keys(Origin.DERIVED))
EVENT_COLUMNS = ["event_kind", "event_what", "event_before", "event_after", "event_message"]
# Added after 0.1, at the end so 0.1's columns keep their places: the knob settings on every
# row ("amp=bf16,cuda_graph=on", "none"); a 0.1 file without it reads as "none".
KNOBS_COLUMN = "knobs"
COLUMNS = ["row_kind", "time_s", *SAMPLE_COLUMNS, *GPU_COLUMNS, *DERIVED_COLUMNS, *EVENT_COLUMNS, KNOBS_COLUMN]


def is_recording_header(header: list[str]) -> bool:
    """A recording's header: this version's, or 0.1's (without the knobs column)."""
    return header[: len(COLUMNS) - 1] == COLUMNS[:-1]


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


def header() -> list[str]:
    return list(COLUMNS)


def format_row(row: list[str]) -> str:
    """One CSV line (with its newline), so a writer can emit and flush it whole."""
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow(row)
    return buf.getvalue()


def _parse(column: str, text: str) -> object:
    if text == "":
        return None
    kind = _KIND.get(column, float)
    if kind is str:
        return text
    if kind is int:
        return int(float(text))
    return float(text)


def parse_rows(rows: Iterable[dict[str, str]]) -> Iterator[Message]:
    """Turn CSV rows (as ``csv.DictReader`` gives them) back into messages, oldest first.

    A sample row gives its NVML sample first, then the workload's: the order in which the
    recorder saw them (the NVML values were joined into the row before it was written)."""
    for row in rows:
        kind = row.get("row_kind")
        t = float(row["time_s"])
        if kind == "event":
            yield Event(
                time_s=t,
                kind=row["event_kind"],  # type: ignore[arg-type]
                what=row.get("event_what", ""),
                before=row.get("event_before", ""),
                after=row.get("event_after", ""),
                message=row.get("event_message", ""),
            )
        elif kind == "sample":
            g = {c: _parse(c, row.get(c, "")) for c in GPU_COLUMNS}
            if any(v is not None for v in g.values()):
                yield GpuSample(time_s=t, **g)  # type: ignore[arg-type]
            s = {c: _parse(c, row.get(c, "")) for c in SAMPLE_COLUMNS}
            yield Sample(time_s=t, knobs=row.get(KNOBS_COLUMN) or "none", **s)  # type: ignore[arg-type]


def read_messages(stream: TextIO) -> Iterator[Message]:
    """Messages of a whole CSV file (header included)."""
    yield from parse_rows(csv.DictReader(stream))
