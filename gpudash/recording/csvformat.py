"""The CSV format of a recorded run: one list of columns, and the conversions both ways.

One header row; one ``sample`` row per tick (the child's latest sample joined with the latest NVML
sample); one ``event`` row per event, and a ``summary`` row with each configuration's statistics when
it ends (``summary_row``; readers of messages skip it); a recording of NVML alone (``gpudash watch
--record``) has a ``gpu`` row per tick instead of samples. Units are in the column names; an empty cell
means "not available". ``pandas.read_csv(path)`` loads it as is. Written by the recorder and the
dashboard's recording; read back by ``gpudash replay`` and ``gpudash report`` through one reader,
``csvread.CsvRecords``, which treats the file as hostile: records are bounded (``MAX_RECORD``; fields by
``csv``'s field limit), control characters are stripped as the text is read, and a bad record is
handed to its caller's policy (replay skips and counts it; report and ``read_table`` refuse it).
"""

from __future__ import annotations

import csv
import functools
import io
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import fields

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
from gpudash.core.protocol import Event, EventKind, GpuReading, GpuSample, Message, RankSample, Sample
from gpudash.core.running import Running
from gpudash.recording import event_data
from gpudash.stats.segments import Segment

CONFIG_COLUMNS = ("workload", "variant", "batch_size")  # what ran, on every row
SAMPLE_COLUMNS = [*CONFIG_COLUMNS, *WORKLOAD_KEYS]  # the fields of a Sample, in CSV order
GPU_COLUMNS = list(NVML_KEYS)  # the fields of a GpuSample
DERIVED_COLUMNS = list(keys(Origin.DERIVED))
EVENT_COLUMNS = ["event_kind", "event_what", "event_before", "event_after", "event_message"]
# Added after 0.1, at the end so 0.1's columns keep their places: the knob settings on every
# row ("amp=bf16,cuda_graph=on", "none"); a 0.1 file without it reads as "none".
KNOBS_COLUMN = "knobs"
# the row_kind column's values (gpu: an NVML tick alone; rank: one rank of a data-parallel run, a window)
ROW_KINDS = ("sample", "event", "summary", "gpu", "rank")
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
# Last, after the training seconds: a ``rank`` row's own (``RankSample``): its global rank, its node,
# its input wait and exposed all-reduce; empty on other rows and in a file without them.
WORLD_COLUMNS = ["rank", "node", "input_wait_pct", "allreduce_exposed_ms"]
# After those: a rank row's own work and its collectives' time (medians, ms a step: ``RankSample.own_ms``,
# ``comm_ms``; ``gpudash.ranks.own_work``); empty where not timed and in a file without them.
OWN_WORK_COLUMNS = ["own_ms", "comm_ms"]
WORLD_COLUMNS += OWN_WORK_COLUMNS
COLUMNS += WORLD_COLUMNS
# Last, after those: what a job's memory holds by kind (``Sample.mem_params_mib`` …: ``gpudash.job.memory``);
# empty on a family's rows and in a file without them.
MEMORY_COLUMNS = list(keys(Origin.MEMORY))
COLUMNS += MEMORY_COLUMNS
# Last, after those: an event's details and typed data (a diagnosis' judgement) as one JSON object
# (``gpudash.recording.event_data``), read back whole; empty on other rows and in a file without it.
EVENT_DATA_COLUMN = "event_data"
COLUMNS += [EVENT_DATA_COLUMN]


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
    "rank": int,
    "node": int,
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
    values.update({c: getattr(sample, c) for c in (*MODEL_COLUMNS, *TRAINING_COLUMNS, *MEMORY_COLUMNS)})
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
        EVENT_DATA_COLUMN: event_data.encode(event),
    }
    if current is not None:
        values.update(
            workload=current.workload, variant=current.variant, batch_size=current.batch_size, knobs=current.knobs
        )
    return [_cell(values.get(c), c) for c in COLUMNS]


def rank_row(r: RankSample, running: Running | None = None) -> list[str]:
    """A ``rank`` row: one rank's figures over a window (the configuration columns: what runs)."""
    values: dict[str, object] = {"row_kind": "rank", **{f.name: getattr(r, f.name) for f in fields(r)}}
    if running is not None:
        values.update(workload=running.workload, variant=running.variant, knobs=running.knobs)
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


_LATEST = COLUMNS.index(TRAINING_COLUMNS[0])  # the columns before the job's training seconds
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
        self._event_data = at.get(EVENT_DATA_COLUMN)
        self._events = [
            (f, at.get(c)) for f, c in zip(("kind", "what", "before", "after", "message"), EVENT_COLUMNS, strict=False)
        ]

        def columns(names: Sequence[str]) -> list[tuple[str, int | None, Callable[[str], object]]]:
            return [(c, at.get(c), _CONVERT[_KIND.get(c, float)]) for c in names]

        self._gpu, self._sample = columns([*GPU_COLUMNS, *GPM_COLUMNS]), columns(SAMPLE_COLUMNS)
        rank_fields = [f.name for f in fields(RankSample) if f.name != "time_s"]
        self._rank = [(f, i, conv) for f, i, conv in columns(rank_fields) if i is not None] if "rank" in at else []
        later = [*LATER_SAMPLE_COLUMNS, *MODEL_COLUMNS, *TRAINING_COLUMNS, *MEMORY_COLUMNS]
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
            cell = cells[self._event_data] if self._event_data is not None else ""
            details, running, data = event_data.decode(cell, kw)
            return [Event(time_s=t, **kw, details=details, running=running, data=data)]  # type: ignore[arg-type]  # fields by the columns' names
        if kind == "gpu":
            return self._gpu_sample(cells, t)
        if kind == "rank" and self._rank:
            return [self._rank_sample(cells, t)]
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

    def _rank_sample(self, cells: Sequence[str], t: float) -> RankSample:
        r = {f: conv(cells[i]) for f, i, conv in self._rank}
        if any(r.get(f) is None for f in ("rank", "steps", "steps_per_s")):
            raise ValueError("a rank row without its rank, steps or steps/s")
        return RankSample(time_s=t, **r)  # type: ignore[arg-type]  # fields by the columns' names

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
